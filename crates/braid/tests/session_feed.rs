//! A stream's feeds (`braid::session::feed`) on tokio's paused clock:
//! what each SOURCE sends, how it is paced, and how bad sources are named.
//! Every test here runs paused, so time moves only when all tasks wait;
//! none sleeps on the real clock (this binary holds no real-clock test).

use braid::session::feed::{feed, Cadence, Feed, Outlet, SourceSpec, DEFAULT_MESSAGE_SIZE};
use braid::session::SessionError;
use braid_core::{Bandwidth, Duration, Instant};
use bytes::Bytes;
use std::future::Future;

/// An outlet that keeps every message, with when it arrived.
#[derive(Default)]
struct Collect(Vec<(Instant, Bytes)>);

impl Outlet for Collect {
    fn send(&mut self, data: Bytes) -> impl Future<Output = Result<(), SessionError>> + Send {
        self.0.push((braid::clock::now(), data));
        async { Ok(()) }
    }
}

impl Collect {
    fn sizes(&self) -> Vec<usize> {
        self.0.iter().map(|(_, b)| b.len()).collect()
    }
    /// When message `i` went, after the first.
    fn offset(&self, i: usize) -> Duration {
        self.0[i].0.saturating_duration_since(self.0[0].0)
    }
}

#[test]
fn a_missing_file_or_a_bad_trace_fails_at_open_and_is_named() {
    let e = Feed::open(
        &SourceSpec::File("/nonexistent/braid-source".into()),
        DEFAULT_MESSAGE_SIZE,
    )
    .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/braid-source"), "{e}");
    let dir = tempdir("bad-trace");
    let file = dir.join("frames");
    std::fs::write(&file, "0.0 8000 1\n0.04 lots 0\n").unwrap();
    let e = Feed::open(
        &format!("trace:{}", file.display()).parse().unwrap(),
        DEFAULT_MESSAGE_SIZE,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("frames") && e.contains("line 2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cadence_counts_messages_due() {
    // 1 Mbit/s of 1250-byte messages: one every 10 ms.
    let p = Cadence::new(Bandwidth::from_mbps(1).transmit_time(1250).as_secs_f64());
    assert_eq!(p.due(0), Duration::ZERO);
    assert_eq!(p.due(3), Duration::from_millis(30));
    assert_eq!(p.due(100), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn cbr_sends_its_rate_in_virtual_time() {
    let source = Feed::open(&"cbr:1mbit:1250B".parse().unwrap(), DEFAULT_MESSAGE_SIZE).unwrap();
    let mut out = Collect::default();
    let done = feed(source, &mut out, Some(Duration::from_secs(2)))
        .await
        .unwrap();
    // Messages due in [0, 2 s): one every 10 ms.
    assert_eq!(done.messages, 200);
    assert_eq!(done.bytes, 200 * 1250);
    assert!(out.sizes().iter().all(|&n| n == 1250));
    assert_eq!(out.offset(1), Duration::from_millis(10));
    assert_eq!(out.offset(199), Duration::from_millis(1990));
}

#[tokio::test(start_paused = true)]
async fn a_file_is_cut_into_messages_and_arrives_whole() {
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    let source = Feed::from_reader(std::io::Cursor::new(data.clone()), 16 << 10);
    let mut out = Collect::default();
    let done = feed(source, &mut out, None).await.unwrap();
    assert_eq!(done.messages, 7);
    assert!(out.sizes()[..6].iter().all(|&n| n == 16 << 10));
    let whole: Vec<u8> = out.0.iter().flat_map(|(_, b)| b.to_vec()).collect();
    assert_eq!(whole, data);
    // Unpaced: everything went at the start.
    assert_eq!(out.offset(6), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_trace_sends_one_message_per_frame_at_its_rate() {
    let dir = tempdir("frames");
    let file = dir.join("frames");
    // MMGC: time_s size_bits is_I, 25 frames/s.
    std::fs::write(&file, "0.0 8000 1\n0.04 1600 0\n0.08 0 0\n0.12 800 0\n").unwrap();
    let spec: SourceSpec = format!("trace:{}", file.display()).parse().unwrap();
    let mut out = Collect::default();
    let done = feed(
        Feed::open(&spec, DEFAULT_MESSAGE_SIZE).unwrap(),
        &mut out,
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.sizes(), vec![1000, 200, 1, 100]);
    assert_eq!(done.messages, 4);
    assert_eq!(out.offset(3), Duration::from_millis(120));
    // Cut at 400 B: the first frame becomes three messages at one time.
    let cut: SourceSpec = format!("trace:{}:400B", file.display()).parse().unwrap();
    let mut out = Collect::default();
    feed(
        Feed::open(&cut, DEFAULT_MESSAGE_SIZE).unwrap(),
        &mut out,
        None,
    )
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.sizes(), vec![400, 400, 200, 200, 1, 100]);
    assert_eq!(out.offset(2), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn greedy_sends_as_fast_as_taken_until_its_stop() {
    /// An outlet that takes one message per millisecond (virtual).
    struct Slow(u64);
    impl Outlet for Slow {
        fn send(&mut self, data: Bytes) -> impl Future<Output = Result<(), SessionError>> + Send {
            self.0 += data.len() as u64;
            async {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                Ok(())
            }
        }
    }
    let spec: SourceSpec = "greedy".parse().unwrap();
    let mut out = Slow(0);
    let done = feed(
        Feed::open(&spec, DEFAULT_MESSAGE_SIZE).unwrap(),
        &mut out,
        Some(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    assert_eq!(done.messages, 100);
    assert_eq!(out.0, 100 * 1200);
}

#[tokio::test(start_paused = true)]
async fn a_file_on_a_reservation_is_paced_at_its_rate() {
    let source = Feed::from_reader(std::io::Cursor::new(vec![7u8; 100_000]), 16 << 10)
        // One 16 KiB message every 100 ms.
        .paced_at(Bandwidth::from_bps(16 * 1024 * 8 * 10));
    let mut out = Collect::default();
    let done = feed(source, &mut out, None).await.unwrap();
    assert_eq!(done.bytes, 100_000);
    assert_eq!(done.messages, 7);
    // The 7th message went 6 periods after the first.
    assert_eq!(out.offset(6), Duration::from_millis(600));
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-feed-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
