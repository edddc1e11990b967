//! What a user sees while a session runs: the live terminal view, the
//! periodic plain lines, and the JSON line, all rendered from a
//! [`Snapshot`] by pure functions.
//!
//! Main items: [`render`] (the terminal view: a line per stream, a line
//! per path and per reported hop), [`plain_lines`] (the same figures as
//! one greppable line each, when stderr is not a terminal), `--format
//! json` (one [`SnapshotRecord`] per period: braid-core's record of the
//! snapshot; fields in docs/sessions.md),
//! [`Names`] (how paths are called), [`LiveView`] (redraws on a terminal).

use braid_core::scheduler::BestAchievable;
use braid_core::session::record::SnapshotRecord;
use braid_core::session::{PathSnapshot, Role, Snapshot, StreamSnapshot, StreamStats};
use braid_core::PathId;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

/// What the user called each path (`direct`, `via=10.0.0.2:7000`, …);
/// paths without a name are shown by number.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// Route text per path.
    pub paths: BTreeMap<PathId, String>,
}

impl Names {
    /// Names paths `0, 1, …` after `routes`, in order.
    pub fn from_routes<S: ToString>(routes: &[S]) -> Names {
        Names {
            paths: routes
                .iter()
                .enumerate()
                .map(|(i, r)| (PathId(i as u32), r.to_string()))
                .collect(),
        }
    }

    /// `p0 direct (127.0.0.1:7000)`, or `p0 (127.0.0.1:7000)` unnamed.
    fn path(&self, p: &PathSnapshot) -> String {
        match self.paths.get(&p.id) {
            Some(n) => format!("p{} {n} ({})", p.id.0, p.addr.remote),
            None => format!("p{} ({})", p.id.0, p.addr.remote),
        }
    }
}

/// A stream's display name: its own, or `stream-ID` (the file name
/// `braid serve` gives it).
pub fn stream_name(s: &StreamSnapshot) -> String {
    braid_core::session::stream_name(s.id, &s.config)
}

/// `p0 2 Mbit/s, p1 1.2 Mbit/s`, or `-`.
fn mapped(s: &StreamSnapshot) -> String {
    if s.paths.is_empty() {
        return "-".into();
    }
    s.paths
        .iter()
        .map(|p| format!("p{} {}", p.path.0, p.rate))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `UNMET: best 2.1 Mbit/s` (with the probability the asked rate could
/// have, or the expected misses, when known).
pub fn unmet_text(best: &BestAchievable) -> String {
    let mut t = format!("UNMET: best {}", best.rate);
    if let Some(p) = best.probability {
        let _ = write!(t, " (asked rate at P={p:.3})");
    }
    if let Some(z) = best.expected_misses {
        let _ = write!(t, " (E[Z]={z:.3} at asked rate)");
    }
    t
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn path_state(p: &PathSnapshot) -> &'static str {
    if p.up {
        "up"
    } else {
        "DOWN"
    }
}

/// The live view: a header, a line per stream (name, spec, rate, share
/// of windows met, paths, an UNMET mark), a line per path (route, up or
/// down, promised, guaranteed and delivered rate, RTT, loss) and a line
/// per hop a relay reported.
pub fn render(snap: &Snapshot, names: &Names) -> String {
    let mut out = String::new();
    let role = match snap.role {
        Role::Source => "source",
        Role::Sink => "sink",
    };
    let _ = writeln!(
        out,
        "braid {role} · session {:016x} · {} · t={:.1}s",
        snap.session.0,
        if snap.scheduler.is_empty() {
            "-"
        } else {
            snap.scheduler
        },
        snap.at.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "{:<14} {:<34} {:>13} {:>7} {:>9}  PATHS",
        "STREAM", "SPEC", "RATE", "MET", "DELAY p95"
    );
    for s in &snap.streams {
        let mut line = format!(
            "{:<14} {:<34} {:>13} {:>7} {:>9}  {}",
            stream_name(s),
            s.config.to_string(),
            s.last.rate.to_string(),
            pct(s.windows_met),
            delay(snap.role, &s.last, |d| d.delay_p95).unwrap_or_else(|| "-".into()),
            mapped(s)
        );
        if let Some(best) = &s.unmet {
            let _ = write!(line, "  {}", unmet_text(best));
        }
        if let Some(why) = &s.refused {
            let _ = write!(line, "  REFUSED by the sink: {why}");
        } else if s.finished {
            line.push_str(if s.complete || snap.role == Role::Source {
                "  finished"
            } else {
                "  finished, INCOMPLETE"
            });
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(
        out,
        "{:<35} {:<5} {:>13} {:>13} {:>13} {:>9} {:>6}",
        "PATH", "STATE", "PROMISED", "GUARANTEED", "DELIVERED", "RTT", "LOSS"
    );
    for p in &snap.paths {
        let _ = writeln!(
            out,
            "{:<35} {:<5} {:>13} {:>13} {:>13} {:>9} {:>6}",
            names.path(p),
            path_state(p),
            p.promised.to_string(),
            p.guaranteed.map_or("-".into(), |g| g.to_string()),
            p.delivered.to_string(),
            p.srtt.to_string(),
            format!("{:.1}%", p.loss * 100.0),
        );
        if let (false, Some(e)) = (p.up, &p.error) {
            let _ = writeln!(out, "     down: {e}");
        }
        for h in &p.hops {
            let _ = writeln!(
                out,
                "     hop {}: rtt {} loss {:.1}% delivered {} queued {} B (report {} old)",
                h.index,
                h.srtt,
                h.loss * 100.0,
                h.delivered,
                h.queued_bytes,
                h.age
            );
        }
    }
    out
}

/// A sink's delay figure of the last interval (`None` on the source, or
/// when nothing arrived in it).
fn delay(
    role: Role,
    last: &StreamStats,
    pick: impl Fn(&StreamStats) -> braid_core::Duration,
) -> Option<String> {
    (role == Role::Sink && last.messages > 0).then(|| pick(last).to_string())
}

/// The sink's p50/p95/p99 delays of the last interval, as `a/b/c`.
fn delays(role: Role, last: &StreamStats) -> Option<String> {
    let p50 = delay(role, last, |d| d.delay_p50)?;
    let p95 = delay(role, last, |d| d.delay_p95)?;
    let p99 = delay(role, last, |d| d.delay_p99)?;
    Some(format!("{p50}/{p95}/{p99}"))
}

/// [`delay`] in milliseconds, for JSON.
/// The same figures as [`render`], one line per stream and per path, each
/// starting with the time: for logs and pipes.
pub fn plain_lines(snap: &Snapshot, names: &Names) -> String {
    let mut out = String::new();
    let t = snap.at.as_secs_f64();
    for s in &snap.streams {
        let _ = write!(
            out,
            "t={t:.1}s stream {} spec={} rate={} met={} paths=[{}] messages={} bytes={}",
            stream_name(s),
            s.config,
            s.last.rate,
            pct(s.windows_met),
            mapped(s),
            s.messages,
            s.bytes
        );
        if let Some(d) = delays(snap.role, &s.last) {
            let _ = write!(out, " delay_p50/p95/p99={d}");
        }
        if let Some(best) = &s.unmet {
            let _ = write!(out, " {}", unmet_text(best));
        }
        if let Some(why) = &s.refused {
            let _ = write!(out, " REFUSED by the sink: {why}");
        } else if s.finished {
            out.push_str(" finished");
            if snap.role == Role::Sink && !s.complete {
                out.push_str(" INCOMPLETE");
            }
        }
        out.push('\n');
    }
    for p in &snap.paths {
        let _ = write!(
            out,
            "t={t:.1}s path {} {} promised={} delivered={} rtt={} loss={:.1}%",
            names.path(p),
            path_state(p),
            p.promised,
            p.delivered,
            p.srtt,
            p.loss * 100.0
        );
        if let (false, Some(e)) = (p.up, &p.error) {
            let _ = write!(out, " error={e:?}");
        }
        for h in &p.hops {
            let _ = write!(
                out,
                " hop{}=[rtt={} loss={:.1}% delivered={}]",
                h.index,
                h.srtt,
                h.loss * 100.0,
                h.delivered
            );
        }
        out.push('\n');
    }
    out
}

/// How periodic output is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The live view on a terminal, plain lines otherwise (stderr).
    Text,
    /// One JSON object per period on stdout.
    Json,
}

/// Periodic output: redraws the view in place on a terminal, writes
/// plain lines elsewhere, or JSON lines on stdout.
#[derive(Debug)]
pub struct LiveView {
    format: Format,
    terminal: bool,
    /// Lines drawn last time (to move the cursor back over them).
    drawn: usize,
}

impl LiveView {
    /// Output in `format`; text is a live view when stderr is a terminal.
    pub fn new(format: Format) -> LiveView {
        use std::io::IsTerminal;
        LiveView {
            format,
            terminal: std::io::stderr().is_terminal(),
            drawn: 0,
        }
    }

    /// Shows `snap`.
    pub fn show(&mut self, snap: &Snapshot, names: &Names) {
        match self.format {
            Format::Json => {
                // Serializing plain data cannot fail; a closed stdout is
                // noticed by the caller's next write, not here.
                if let Ok(line) = serde_json::to_string(&SnapshotRecord::new(snap, &names.paths)) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            Format::Text if self.terminal => {
                let text = render(snap, names);
                let mut err = std::io::stderr().lock();
                if self.drawn > 0 {
                    // Cursor up over the last drawing, clear to the end.
                    let _ = write!(err, "\x1b[{}A\x1b[J", self.drawn);
                }
                let _ = err.write_all(text.as_bytes());
                self.drawn = text.lines().count();
            }
            Format::Text => {
                let _ = std::io::stderr().write_all(plain_lines(snap, names).as_bytes());
            }
        }
    }

    /// Stops redrawing in place: what follows is printed below the view.
    pub fn detach(&mut self) {
        self.drawn = 0;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use braid_core::scheduler::StreamSpec;
    use braid_core::session::{
        HopSnapshot, PathPromise, SessionId, SessionStats, StreamConfig, StreamStats,
    };
    use braid_core::transport::FourTuple;
    use braid_core::Bandwidth;
    use braid_core::{Duration, Instant, StreamId};

    /// A source with two paths (one relayed) and two streams, one unmet.
    pub(crate) fn snapshot() -> Snapshot {
        let path = |id: u32, port: u16, hops: Vec<HopSnapshot>| PathSnapshot {
            id: PathId(id),
            addr: FourTuple::from_remote(([127, 0, 0, 1], port).into()),
            up: id == 0,
            promised: Bandwidth::from_mbps(3),
            guaranteed: Some(Bandwidth::from_mbps(8)),
            delivered: Bandwidth::from_kbps(3200),
            srtt: Duration::from_millis(42),
            loss: 0.005,
            samples: 50,
            hops,
            bytes_sent: 1_000_000,
            packets_lost: 3,
            error: (id == 1).then(|| "idle timeout".to_string()),
        };
        let video: StreamConfig = "rate=3.2mbit@0.95".parse().unwrap();
        let stream = |id: u32, config: StreamConfig, unmet| StreamSnapshot {
            id: StreamId(id),
            config,
            last: StreamStats {
                rate: Bandwidth::from_kbps(3200),
                ..StreamStats::default()
            },
            windows_met: Some(0.99),
            paths: vec![PathPromise {
                path: PathId(0),
                rate: Bandwidth::from_mbps(2),
                probability: Some(0.95),
            }],
            unmet,
            messages: 10,
            bytes: 14_000,
            finished: false,
            complete: false,
            refused: None,
        };
        Snapshot {
            at: Instant::from_nanos(12_000_000_000),
            role: Role::Source,
            session: SessionId(0xabc),
            scheduler: "pgos",
            paths: vec![
                path(0, 7000, vec![]),
                path(
                    1,
                    7001,
                    vec![HopSnapshot {
                        index: 1,
                        srtt: Duration::from_millis(20),
                        loss: 0.01,
                        delivered: Bandwidth::from_mbps(5),
                        queued_bytes: 4096,
                        age: Duration::from_millis(300),
                    }],
                ),
            ],
            streams: vec![
                stream(1, video.with_name("video"), None),
                stream(
                    2,
                    StreamConfig::new(StreamSpec::best_effort(1).unwrap()),
                    Some(BestAchievable {
                        rate: Bandwidth::from_kbps(2100),
                        probability: Some(0.8),
                        expected_misses: None,
                    }),
                ),
            ],
            stats: SessionStats::default(),
        }
    }

    fn names() -> Names {
        Names::from_routes(&["direct", "via=127.0.0.1:7001"])
    }

    #[test]
    fn the_view_has_a_line_per_stream_path_and_hop() {
        let text = render(&snapshot(), &names());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 1 + 2 + 1 + 2 + 2, "{text}");
        assert!(lines[0].contains("session 0000000000000abc") && lines[0].contains("pgos"));
        let video = lines[2];
        for part in [
            "video",
            "rate=3.2mbit@0.95",
            "3.2 Mbit/s",
            "99.0%",
            "p0 2 Mbit/s",
        ] {
            assert!(video.contains(part), "{part:?} in {video:?}");
        }
        assert!(!video.contains("UNMET"));
        let other = lines[3];
        assert!(other.starts_with("stream-2 ") && other.contains("best-effort"));
        assert!(other.contains("UNMET: best 2.1 Mbit/s"), "{other}");
        let p0 = lines[5];
        for part in [
            "p0",
            "direct (127.0.0.1:7000)",
            "up",
            "3 Mbit/s",
            "42ms",
            "0.5%",
        ] {
            assert!(p0.contains(part), "{part:?} in {p0:?}");
        }
        assert!(lines[6].contains("via=127.0.0.1:7001") && lines[6].contains("DOWN"));
        assert!(lines[7].contains("down: idle timeout"), "{}", lines[7]);
        assert!(
            lines[8].contains("hop 1: rtt 20ms loss 1.0%"),
            "{}",
            lines[8]
        );
    }

    #[test]
    fn plain_lines_carry_the_same_figures() {
        let text = plain_lines(&snapshot(), &names());
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.lines().all(|l| l.starts_with("t=12.0s ")));
        assert!(text.contains("stream video spec=rate=3.2mbit@0.95 rate=3.2 Mbit/s met=99.0%"));
        assert!(text.contains("UNMET: best 2.1 Mbit/s"));
        assert!(text.contains("path p1 via=127.0.0.1:7001 (127.0.0.1:7001) DOWN"));
        assert!(text.contains("hop1=[rtt=20ms"));
    }

    #[test]
    fn the_json_line_has_every_figure() {
        let v: serde_json::Value =
            serde_json::to_value(SnapshotRecord::new(&snapshot(), &names().paths)).unwrap();
        assert_eq!(v["version"], braid_core::session::record::RECORD_VERSION);
        assert_eq!(v["role"], "source");
        assert_eq!(v["streams"][0]["name"], "video");
        assert_eq!(v["streams"][0]["rate_bps"], 3_200_000);
        assert_eq!(v["streams"][0]["unmet"], serde_json::Value::Null);
        assert_eq!(v["streams"][1]["unmet"]["best_rate_bps"], 2_100_000);
        assert_eq!(v["paths"][1]["hops"][0]["queued_bytes"], 4096);
        assert_eq!(v["paths"][0]["name"], "direct");
        assert_eq!(v["paths"][0]["rtt_s"], 0.042);
        assert_eq!(v["paths"][1]["error"], "idle timeout");
    }
}
