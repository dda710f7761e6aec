//! A heatmap of a paper-width layer (13 positions x 384 features, 2,000 lines) is drawn within a
//! stated memory bound, as a PNG of the promised size. This file holds one test so that the
//! process's peak memory is this test's alone.

use burn::tensor::{Device, Tensor, TensorData};
use rand::{Rng, SeedableRng, rngs::StdRng};
use symbreak_analysis::correlation::{BlockScore, Correlation};
use symbreak_analysis::heatmap::{HEATMAP_PX, HeatmapPanel, Resolution, render};

/// The bound on the peak resident memory of computing and drawing one paper-width matrix:
/// samples (2,000 x 4,992 f32 = 40 MB) a few times over, the 4,992^2 matrix (100 MB) on the
/// device and on the host, and the test process itself. Measured: 195 MiB (ndarray, 2 cores);
/// 197 MiB (flex).
const PEAK_BYTES: u64 = 512 << 20;

fn device() -> Device {
    Device::flex()
}

fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[test]
fn a_paper_width_heatmap_renders_within_the_memory_bound() {
    let (lines, positions, width) = (2_000, 13, 384);
    let features = positions * width;
    let mut rng = StdRng::seed_from_u64(7);
    let mut samples = Vec::with_capacity(lines * features);
    for _ in 0..lines {
        let hidden: Vec<f32> = (0..positions).map(|_| rng.random::<f32>()).collect();
        samples.extend((0..features).map(|f| hidden[f / width] + 0.5 * rng.random::<f32>()));
    }
    let samples = Tensor::<2>::from_data(TensorData::new(samples, [lines, features]), &device());
    let correlation = Correlation::of(samples);
    assert!(BlockScore::of(&correlation, width).blockiness > 0.5);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("paper-width.png");
    let symbols: Vec<char> = "$aaa+bbb=sss$".chars().collect();
    let panel = HeatmapPanel {
        title: vec!["synthetic".into(), "13 positions x 384".into()],
        correlation: &correlation,
        width,
        symbols: &symbols,
    };
    render(&path, "paper width", &[panel], &["one caption line".into()]).unwrap();

    let image = image::open(&path).unwrap();
    assert_eq!(image.width(), 40 + HEATMAP_PX as u32 + 40 + 120);
    assert_eq!(
        image.height(),
        44 + 48 + 20 + HEATMAP_PX as u32 + 16 + 20 + 12
    );
    assert_eq!(
        Resolution::for_features(features),
        Resolution::Averaged(HEATMAP_PX)
    );

    match peak_resident_bytes() {
        Some(peak) => {
            eprintln!("peak resident memory: {} MiB", peak >> 20);
            assert!(peak < PEAK_BYTES, "peak {} MiB", peak >> 20);
        }
        None => eprintln!("SKIPPED the memory check: no /proc/self/status on this system"),
    }
}
