//! A small SVG line-chart writer (no plotting dependency).
//!
//! Main types: [`LineChart`] and [`Series`]. The output is a fixed-size
//! standalone SVG with axes, "nice" ticks (1, 2, 5 × 10^k), one polyline per
//! series (optionally dashed) and a legend. Invariant: rendering is
//! deterministic (fixed number formatting, no randomness).

use super::Report;
use std::fmt::Write;

const W: f64 = 900.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;
const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (e.g. capacities).
    pub dashed: bool,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A tick step of 1, 2 or 5 × 10^k giving at most about `n` ticks over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    if span.is_nan() || span <= 0.0 {
        return 1.0;
    }
    let raw = span / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

impl LineChart {
    /// Renders the chart as a standalone SVG document.
    pub fn render(&self) -> String {
        let pts = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in pts {
            if x.is_finite() && y.is_finite() {
                x0 = x0.min(x);
                x1 = x1.max(x);
                y1 = y1.max(y);
            }
        }
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        if x0 > 0.0 && x0 <= 0.1 * (x1 - x0) {
            x0 = 0.0; // a time axis that (nearly) starts at zero starts at zero
        }
        let ystep = nice_step(if y1 > 0.0 { y1 } else { 1.0 }, 6.0);
        let ymax = ((y1 / ystep).ceil() * ystep).max(ystep);
        let xstep = nice_step(x1 - x0, 10.0);
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| TOP + ph - (y / ymax) * ph;

        let mut o = String::new();
        let _ = writeln!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + pw / 2.0,
            esc(&self.title)
        );
        // Grid and ticks.
        let mut y = 0.0;
        while y <= ymax + ystep * 1e-9 {
            let py = sy(y);
            let _ = writeln!(
                o,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                py + 4.0,
                fmt_tick(y, ystep)
            );
            y += ystep;
        }
        let mut x = (x0 / xstep).ceil() * xstep;
        while x <= x1 + xstep * 1e-9 {
            let px = sx(x);
            let _ = writeln!(
                o,
                r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 16.0,
                fmt_tick(x, xstep)
            );
            x += xstep;
        }
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 15.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            o,
            r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
            TOP + ph / 2.0,
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        // Lines and legend.
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let dash = if s.dashed {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let mut d = String::new();
            for &(x, y) in &s.points {
                if x.is_finite() && y.is_finite() {
                    let _ = write!(d, "{:.1},{:.1} ", sx(x), sy(y));
                }
            }
            let _ = writeln!(
                o,
                r#"<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{}"/>"#,
                d.trim_end()
            );
            let ly = TOP + 10.0 + i as f64 * 18.0;
            let lx = LEFT + pw + 12.0;
            let _ = writeln!(
                o,
                r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
                lx + 22.0,
                lx + 28.0,
                ly + 4.0,
                esc(&s.name)
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

/// Averages consecutive groups of `k` values.
fn group(values: &[f64], k: usize) -> Vec<f64> {
    values
        .chunks(k.max(1))
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect()
}

/// The report's standard chart: flow throughput and link capacity.
pub(super) fn report_chart(r: &Report) -> LineChart {
    let per_sec = (1.0 / r.bin_s).round().max(1.0) as usize;
    let k = if r.duration_s >= 10.0 { per_sec } else { 1 };
    let width = r.bin_s * k as f64;
    let to_points = |v: &[f64]| -> Vec<(f64, f64)> {
        group(v, k)
            .into_iter()
            .enumerate()
            .map(|(i, y)| (i as f64 * width + width / 2.0, y))
            .collect()
    };
    let mut series = Vec::new();
    for f in &r.flows {
        series.push(Series {
            name: format!("{} ({})", f.name, f.kind),
            points: to_points(&f.series_mbps),
            dashed: false,
        });
    }
    for l in &r.links {
        series.push(Series {
            name: format!("{} capacity", l.name),
            points: to_points(&l.series_capacity_mbps),
            dashed: true,
        });
    }
    LineChart {
        title: format!("{} (seed {})", r.scenario, r.seed),
        x_label: "time [s]".into(),
        y_label: format!("Mbit/s (mean over {}s)", super::r4(width)),
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_valid_looking_svg() {
        let c = LineChart {
            title: "a <b>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "s".into(),
                points: vec![(0.0, 1.0), (1.0, 3.0), (2.0, f64::NAN)],
                dashed: true,
            }],
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("a &lt;b&gt;"));
        assert!(s.contains("stroke-dasharray"));
        assert_eq!(nice_step(9.0, 6.0), 2.0);
        assert_eq!(nice_step(0.3, 6.0), 0.05);
    }
}
