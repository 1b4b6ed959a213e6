//! Small charts over time, drawn on the server as inline SVG (no script,
//! nothing the CSP has to allow): stacked bars (runs per state, calls and
//! errors per bucket) and lines (duration percentiles per bucket). Every
//! label goes through `escape`; colours are the stylesheet's classes.
//! Each bar and point carries a `<title>` (its bucket and values), the
//! figure a caption with the scale and the window.

use std::fmt::Write as _;

use reel_viewer::render::html::escape;
use reel_viewer::render::text::timestamp;

/// The drawing's size in SVG units (stretched to the figure's width).
const WIDTH: f64 = 480.0;
const HEIGHT: f64 = 80.0;

/// The time axis of a chart: where its buckets start and their width.
pub(crate) struct Axis {
    /// The first bucket's start (unix nanos).
    pub since: i64,
    /// Each bucket's width.
    pub bucket_ns: u64,
    /// How many buckets.
    pub buckets: usize,
}

impl Axis {
    fn start(&self, i: usize) -> i64 {
        self.since
            .saturating_add((self.bucket_ns as i64).saturating_mul(i as i64))
    }

    /// `from → to` of bucket `i`.
    fn span(&self, i: usize) -> String {
        format!(
            "{} → {}",
            timestamp(self.start(i)),
            timestamp(self.start(i + 1))
        )
    }
}

/// One stacked part of a bar: its class (a colour), its name, its value.
pub(crate) struct Part<'a> {
    pub class: &'a str,
    pub name: &'a str,
    pub value: u64,
}

fn open(out: &mut String, label: &str) {
    let _ = write!(
        out,
        "<figure class=\"chart\"><svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         preserveAspectRatio=\"none\" role=\"img\" aria-label=\"{l}\"><title>{l}</title>\
         <line class=\"axis\" x1=\"0\" y1=\"{HEIGHT}\" x2=\"{WIDTH}\" y2=\"{HEIGHT}\" \
         vector-effect=\"non-scaling-stroke\"/>",
        l = escape(label)
    );
}

fn close(out: &mut String, axis: &Axis, scale: &str, legend: &[(&str, &str)]) {
    out.push_str("</svg><figcaption>");
    for (class, name) in legend {
        let _ = write!(out, "<span class=\"key {class}\"></span>{} ", escape(name));
    }
    let _ = write!(
        out,
        "<span class=\"muted\">· {} · {} → {}</span></figcaption></figure>",
        escape(scale),
        escape(&timestamp(axis.since)),
        escape(&timestamp(axis.start(axis.buckets)))
    );
}

/// Stacked bars, one per bucket (`bars[i]`, bottom part first), scaled to
/// the tallest; `legend` names the parts' classes.
pub(crate) fn bars(
    label: &str,
    axis: &Axis,
    bars: &[Vec<Part<'_>>],
    legend: &[(&str, &str)],
) -> String {
    let mut out = String::new();
    open(&mut out, label);
    let top = bars
        .iter()
        .map(|parts| parts.iter().map(|p| p.value).sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let w = WIDTH / axis.buckets.max(1) as f64;
    for (i, parts) in bars.iter().enumerate() {
        let mut y = HEIGHT;
        let what: Vec<String> = parts
            .iter()
            .filter(|p| p.value > 0)
            .map(|p| format!("{} {}", p.value, p.name))
            .collect();
        if what.is_empty() {
            continue;
        }
        let title = format!("{}: {}", axis.span(i), what.join(", "));
        let _ = write!(out, "<g><title>{}</title>", escape(&title));
        for p in parts.iter().filter(|p| p.value > 0) {
            let h = p.value as f64 / top as f64 * (HEIGHT - 2.0);
            y -= h;
            let _ = write!(
                out,
                "<rect class=\"{}\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{h:.1}\"/>",
                p.class,
                i as f64 * w + w * 0.1,
                w * 0.8
            );
        }
        out.push_str("</g>");
    }
    close(&mut out, axis, &format!("tallest bar {top}"), legend);
    out
}

/// One line of a line chart: its class, its name, a value per bucket
/// (`None`: nothing in that bucket).
pub(crate) struct Line<'a> {
    pub class: &'a str,
    pub name: &'a str,
    pub values: Vec<Option<u64>>,
}

/// Lines over the buckets, scaled to the largest value; each bucket's
/// values in a title (`shown` formats a value).
pub(crate) fn lines(
    label: &str,
    axis: &Axis,
    lines: &[Line<'_>],
    shown: fn(u64) -> String,
) -> String {
    let mut out = String::new();
    open(&mut out, label);
    let top = lines
        .iter()
        .flat_map(|l| l.values.iter().flatten())
        .copied()
        .max()
        .unwrap_or(0)
        .max(1);
    let w = WIDTH / axis.buckets.max(1) as f64;
    let at = |i: usize, v: u64| {
        (
            i as f64 * w + w / 2.0,
            HEIGHT - 1.0 - v as f64 / top as f64 * (HEIGHT - 4.0),
        )
    };
    for line in lines {
        let mut points: Vec<(f64, f64)> = line
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| at(i, v)))
            .collect();
        match points.as_slice() {
            [] => continue,
            // One bucket: a short level stroke across it.
            [(x, y)] => points = vec![(x - w * 0.3, *y), (x + w * 0.3, *y)],
            _ => {}
        }
        let points: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = write!(
            out,
            "<polyline class=\"{}\" points=\"{}\" vector-effect=\"non-scaling-stroke\"/>",
            line.class,
            points.join(" ")
        );
    }
    // A column per bucket, unpainted, that names its values on hover.
    for i in 0..axis.buckets {
        let values: Vec<String> = lines
            .iter()
            .filter_map(|l| Some(format!("{} {}", l.name, shown((*l.values.get(i)?)?))))
            .collect();
        if values.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<rect class=\"hit\" x=\"{:.1}\" y=\"0\" width=\"{w:.1}\" height=\"{HEIGHT}\">\
             <title>{}</title></rect>",
            i as f64 * w,
            escape(&format!("{}: {}", axis.span(i), values.join(", ")))
        );
    }
    let legend: Vec<(&str, &str)> = lines.iter().map(|l| (l.class, l.name)).collect();
    close(&mut out, axis, &format!("top {}", shown(top)), &legend);
    out
}
