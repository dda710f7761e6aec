//! How the process's CPU arithmetic treats subnormal floats (magnitudes below 1.2e-38 in f32).
//!
//! x86 processors handle an operation with a subnormal input or result in microcode, many times
//! slower than a normal one. A training run can fill its tensors with such values once a model
//! starts to learn (which tensors, in the run below, was not traced): a width-128 learned PE
//! {1,2} run slowed from 0.5 s to 2.5 s a step as it left its plateau, while another seed beside
//! it kept its pace, and ran at 0.5 s again from the same checkpoint with this setting
//! (docs/performance.md). PyTorch offers the same as `torch.set_flush_denormal(True)`. Only
//! values that would have been below 1.2e-38 change; the runs compared on both settings logged
//! the same metrics to six digits, though over a long run a difference in the last bits can grow.

/// Makes this thread, and every thread it starts afterwards, treat subnormal inputs as zero and
/// flush subnormal results to zero (x86-64; other processors are left as they are).
///
/// Called at the start of `main`, before any thread exists: on Linux a new thread starts with a
/// copy of its creator's floating-point control register (the test below checks it), so the
/// worker pools that backends start later inherit the setting. Other systems were not checked.
pub fn flush_subnormals_to_zero() {
    #[cfg(target_arch = "x86_64")]
    {
        // MXCSR bit 15 (FTZ): subnormal results become zero; bit 6 (DAZ): subnormal inputs are
        // read as zero.
        const FLUSH_TO_ZERO: u32 = 1 << 15;
        const DENORMALS_ARE_ZERO: u32 = 1 << 6;
        let mut control: u32 = 0;
        // SAFETY: stmxcsr stores the 32-bit control register into `control`, which outlives the
        // instruction; ldmxcsr loads it back with two mode bits set, which every x86-64 CPU has.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut control, options(nostack, preserves_flags));
            control |= FLUSH_TO_ZERO | DENORMALS_ARE_ZERO;
            std::arch::asm!("ldmxcsr [{}]", in(reg) &control, options(nostack, preserves_flags));
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::hint::black_box;

    use super::flush_subnormals_to_zero;

    /// Half of the smallest normal f32, computed at run time.
    fn subnormal_product() -> f32 {
        black_box(f32::MIN_POSITIVE) * black_box(0.5)
    }

    #[test]
    fn subnormals_flush_to_zero_here_and_in_threads_started_after() {
        // Each test runs on its own thread, so setting the mode here leaves the others alone.
        std::thread::spawn(|| {
            assert!(
                subnormal_product() > 0.0,
                "the default mode keeps subnormals"
            );
            flush_subnormals_to_zero();
            assert_eq!(subnormal_product(), 0.0);
            assert_eq!(
                black_box(1.5f32) * black_box(2.0),
                3.0,
                "normal floats are unchanged"
            );
            let in_child = std::thread::spawn(subnormal_product).join().unwrap();
            assert_eq!(
                in_child, 0.0,
                "a thread started afterwards inherits the mode"
            );
        })
        .join()
        .unwrap();
    }
}
