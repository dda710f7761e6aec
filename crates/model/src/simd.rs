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

/// `e^x` for `x <= 0` (the arguments of the fused sigmoid and softmax), within 2 units in the
/// last place of the standard library's `exp` (test below), written with arithmetic alone so that
/// a loop of it vectorises: the standard library calls libm once per element.
///
/// `x = n ln 2 + r` with `n` the nearest integer to `x / ln 2` and `|r| <= ln 2 / 2`; `e^r` by
/// a polynomial (the coefficients of Cephes' `expf`), then `2^n` put into the exponent bits.
/// (A polynomial exp tried in 2026-12-05 lost to glibc's `expf`: compiled for SSE2 it did not
/// vectorise. In a [`widest!`] loop, without a float-to-integer cast, it does.)
/// Arguments below -87.3 (where `e^x` leaves the normal range) give about 1.2e-38, not 0.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two, so that `n ln 2` is exact in the first part.
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 x 2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.336_55, 0.0);
    let shifted = x * LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = x - n * LN2_HIGH - n * LN2_LOW;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    // `shifted` lies in [2^23, 2^24), where one unit in the last place is 1, so its bits are
    // ROUND's plus `n`: an integer without a float-to-integer conversion (which, saturating,
    // would not vectorise).
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    e_r * f32::from_bits(((n_bits + 127) as u32) << 23)
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

    #[test]
    fn exp_nonpositive_is_within_two_ulp_of_the_standard_library() {
        let mut worst = 0.0f32;
        for i in 0..=2_000_000u32 {
            let x = -87.0 * i as f32 / 2_000_000.0;
            let (ours, std) = (exp_nonpositive(x), x.exp());
            // One unit in the last place of `std`, for normal numbers.
            let ulp = f32::from_bits(std.to_bits() + 1) - std;
            worst = worst.max((ours - std).abs() / ulp);
        }
        assert!(worst <= 2.0, "{worst} units in the last place");
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert!(exp_nonpositive(-1000.0) < 1.2e-38);
        assert!(exp_nonpositive(f32::NEG_INFINITY) < 1.2e-38);
    }
}
