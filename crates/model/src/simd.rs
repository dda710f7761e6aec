//! The hand-written loops of [`crate::fused`] compiled for the widest vector instructions the
//! CPU has, chosen at run time.
//!
//! The project is built for baseline x86-64, so that one binary runs on any x86-64 CPU; its own
//! loops then use 4-wide SSE2 vectors, while the gemm crate and flex's element-wise kernels pick
//! AVX2 or AVX-512 at run time. [`widest!`] does the same for a loop: it defines a function
//! whose body is compiled for AVX-512F, for AVX2 with FMA and for the baseline, and calls the
//! widest version the CPU has.
//!
//! Results do not depend on the choice: Rust neither fuses a multiplication and an addition into
//! one FMA nor reorders a sum, so each vector lane computes the same operations in the same order
//! at any width.

/// Defines a function whose body is compiled three times (for AVX-512F, for AVX2 with FMA, and
/// for the baseline) and runs the widest version the CPU has:
///
/// ```text
/// widest! {
///     /// Docs.
///     fn name(a: &[f32], out: &mut [f32]) { ... }
/// }
/// ```
///
/// The body is an `#[inline(always)]` function called from two functions compiled with
/// `#[target_feature]`, so it is inlined there and compiled with their instructions. (A closure
/// passed to such a function is not reliably inlined, and would stay baseline code.) The
/// detection is one cached load per call: call it per batch row or per block of rows, not per
/// element.
macro_rules! widest {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn kernel($($arg: $ty),*) $body

            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn avx512($($arg: $ty),*) {
                    kernel($($arg),*)
                }

                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) {
                    kernel($($arg),*)
                }

                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F (and so AVX2 and FMA).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has AVX2 and FMA.
                    return unsafe { avx2($($arg),*) };
                }
            }
            kernel($($arg),*)
        }
    };
}
pub(crate) use widest;

/// `f(a_0, b_0) + f(a_1, b_1) + ...` over two slices of the same length, in eight running sums
/// (lane `l` adds the terms `l`, `l + 8`, ...; then the lanes in order, then the terms past the
/// last multiple of 8). A single running sum may not be reordered, so could not use vectors.
#[inline(always)]
pub(crate) fn lane_sum(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> f32 {
    assert_eq!(a.len(), b.len(), "lane_sum over slices of one length");
    let (a_whole, a_rest) = a.as_chunks::<8>();
    let (b_whole, b_rest) = b.as_chunks::<8>();
    let mut lanes = [0.0f32; 8];
    for (a, b) in a_whole.iter().zip(b_whole) {
        for lane in 0..8 {
            lanes[lane] += f(a[lane], b[lane]);
        }
    }
    lanes.iter().sum::<f32>()
        + a_rest
            .iter()
            .zip(b_rest)
            .map(|(&a, &b)| f(a, b))
            .sum::<f32>()
}

/// `a . b` in eight running sums (see [`lane_sum`]); `b` may be longer than `a`.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    lane_sum(a, &b[..a.len()], |a, b| a * b)
}

/// `out += scale * x`.
#[inline(always)]
pub(crate) fn add_scaled(out: &mut [f32], scale: f32, x: &[f32]) {
    for (o, &x) in out.iter_mut().zip(x) {
        *o += scale * x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    widest! {
        /// `out = (out + scale x) / (a . b)`: the kinds of loops the fused operations run.
        fn scale_and_divide(a: &[f32], b: &[f32], scale: f32, x: &[f32], out: &mut [f32]) {
            let d = dot(a, b);
            add_scaled(out, scale, x);
            for o in out.iter_mut() {
                *o /= d;
            }
        }
    }

    /// On this machine the AVX-512 or AVX2 version runs; it must give the bits of plain scalar
    /// code that sums in the documented order.
    #[test]
    fn the_widest_version_computes_the_same_bits_as_plain_scalar_code() {
        let values = |n: usize, seed: f32| -> Vec<f32> {
            (0..n)
                .map(|i| ((i as f32 + seed) * 0.731).sin() * 3.0)
                .collect()
        };
        for n in [1, 7, 13, 16, 33, 100] {
            let (a, b, x) = (values(n, 0.1), values(n, 0.7), values(n, 1.3));
            let mut out = values(n, 2.9);
            let mut expected = out.clone();
            scale_and_divide(&a, &b, 0.37, &x, &mut out);
            let mut lanes = [0.0f32; 8];
            for i in 0..n / 8 * 8 {
                lanes[i % 8] += a[i] * b[i];
            }
            let rest: f32 = (n / 8 * 8..n).map(|i| a[i] * b[i]).sum();
            let d = lanes.iter().sum::<f32>() + rest;
            for i in 0..n {
                expected[i] = (expected[i] + 0.37 * x[i]) / d;
            }
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&expected), "{n} elements");
        }
    }
}
