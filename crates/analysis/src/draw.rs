//! What every figure shares: the font, the colour scale and the error type.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::style::{FontStyle, RGBColor, register_font};

/// The font family every figure's text uses (registered from a TrueType file).
pub const FONT: &str = "sans-serif";

/// Where TrueType fonts usually live; `SYMBREAK_FONT` overrides the search.
const FONT_FILES: [&str; 6] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

/// Why a figure could not be drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureError(pub String);

impl fmt::Display for FigureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FigureError {}

/// A drawing failure of `path`, as a [`FigureError`].
pub fn drawing_failed<E: fmt::Debug>(path: &Path) -> impl Fn(E) -> FigureError + '_ {
    move |e| FigureError(format!("cannot draw {}: {e:?}", path.display()))
}

/// Draws into `NAME.partial.png` beside `path`, then renames it into place: a figure on disk is
/// always whole, even after a crash or a kill mid-drawing.
pub fn write_png(
    path: &Path,
    draw: impl FnOnce(&Path) -> Result<(), FigureError>,
) -> Result<(), FigureError> {
    let partial = path.with_extension("partial.png");
    draw(&partial)?;
    std::fs::rename(&partial, path)
        .map_err(|e| FigureError(format!("cannot write {}: {e}", path.display())))
}

/// Registers the figures' font once; an error names the fix when no font file is found.
pub fn ensure_font() -> Result<(), FigureError> {
    static FONT_FILE: OnceLock<Result<PathBuf, FigureError>> = OnceLock::new();
    FONT_FILE
        .get_or_init(|| {
            let candidates: Vec<PathBuf> = match std::env::var_os("SYMBREAK_FONT") {
                Some(path) => vec![PathBuf::from(path)],
                None => FONT_FILES.iter().map(PathBuf::from).collect(),
            };
            for path in &candidates {
                if let Ok(bytes) = std::fs::read(path) {
                    // plotters keeps registered fonts for the life of the process.
                    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                    return register_font(FONT, FontStyle::Normal, bytes)
                        .map(|()| path.clone())
                        .map_err(|_| {
                            FigureError(format!("{} is not a usable TrueType font", path.display()))
                        });
                }
            }
            Err(FigureError(format!(
                "no TrueType font found for the figures' text (looked at {}); install one \
                 (Debian/Ubuntu: apt-get install fonts-dejavu-core) or set SYMBREAK_FONT=/path/to/font.ttf",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        })
        .clone()
        .map(|_| ())
}

/// Viridis (perceptually uniform, readable in grey and by most colour-blind readers), sampled
/// at five points and interpolated linearly: `t` in [0, 1].
pub fn viridis(t: f32) -> RGBColor {
    const STOPS: [(f32, f32, f32); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (STOPS.len() - 1) as f32;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f32;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |p: f32, q: f32| (p + (q - p) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Distinct line colours for seeds (Okabe-Ito, readable by colour-blind readers).
pub const SERIES: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(0, 0, 0),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viridis_ends_and_middle() {
        assert_eq!(viridis(0.0), RGBColor(68, 1, 84));
        assert_eq!(viridis(1.0), RGBColor(253, 231, 37));
        assert_eq!(viridis(0.5), RGBColor(33, 145, 140));
        assert_eq!(viridis(f32::NAN), viridis(0.0));
        assert_eq!(viridis(7.0), viridis(1.0));
    }
}
