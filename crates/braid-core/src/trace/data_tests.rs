//! Tests against the real traces in `../shared/data/traces`, read in place
//! (never copied into the repository). Each original must bin, at 100 ms,
//! to its normalised `.tsv` copy within the copy's rounding (4 decimals of
//! Mbit/s). Skipped with a printed reason when the folder is absent.

use super::{Trace, TraceFormat};
use crate::time::Duration;
use std::path::PathBuf;

fn traces_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/traces");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: {} is absent (the shared data sets are not on this machine)",
            dir.display()
        );
        None
    }
}

/// (path under traces/, expected format, factor the `.tsv` applied)
const PAIRS: &[(&str, TraceFormat, f64)] = &[
    ("mahimahi/ATT-LTE-driving.down", TraceFormat::Mahimahi, 1.0),
    (
        "mahimahi/TMobile-LTE-driving.down",
        TraceFormat::Mahimahi,
        1.0,
    ),
    (
        "mahimahi/TMobile-UMTS-driving.down",
        TraceFormat::Mahimahi,
        1.0,
    ),
    (
        "mahimahi/Verizon-EVDO-driving.down",
        TraceFormat::Mahimahi,
        1.0,
    ),
    ("norway_hsdpa/norway_bus_11", TraceFormat::Series, 1.0),
    ("norway_hsdpa/norway_car_3", TraceFormat::Series, 1.0),
    ("norway_hsdpa/norway_ferry_20", TraceFormat::Series, 1.0),
    ("norway_hsdpa/norway_metro_2", TraceFormat::Series, 1.0),
    ("norway_hsdpa/norway_train_12", TraceFormat::Series, 1.0),
    ("norway_hsdpa/norway_tram_10", TraceFormat::Series, 1.0),
    (
        "fcc/fcc_trace_7289_http---www.yahoo.com",
        TraceFormat::Series,
        1.0,
    ),
    (
        "fcc/fcc_trace_663494_http---www.facebook.com",
        TraceFormat::Series,
        1.0,
    ),
    (
        "fcc/fcc_trace_866_http---www.amazon.com",
        TraceFormat::Series,
        1.0,
    ),
    ("oboe/oboe_trace_372.txt", TraceFormat::Series, 1.0),
    // Puffer originals are MByte/s; the `.tsv` multiplied by 8 (SOURCES.md).
    ("puffer/puffer_211017_A", TraceFormat::Series, 8.0),
    ("puffer/puffer_211017_B", TraceFormat::Series, 8.0),
    (
        "5g_ireland/Download_Driving_B_2019.12.16_14.23.32.csv",
        TraceFormat::G5Csv,
        1.0,
    ),
    (
        "5g_ireland/Download_Driving_B_2020.01.16_07.26.43.csv",
        TraceFormat::G5Csv,
        1.0,
    ),
    (
        "5g_ireland/Download_Static_B_2020.02.14_13.21.26.csv",
        TraceFormat::G5Csv,
        1.0,
    ),
];

#[test]
fn originals_bin_to_their_tsv_copies() {
    let Some(dir) = traces_dir() else { return };
    let interval = Duration::from_millis(100);
    let mut checked = 0;
    for &(name, format, factor) in PAIRS {
        let path = dir.join(name);
        let tsv_path = dir.join(format!("{name}.tsv"));
        let (Ok(text), Ok(tsv_text)) = (
            std::fs::read_to_string(&path),
            std::fs::read_to_string(&tsv_path),
        ) else {
            eprintln!("skipping {name}: file or its .tsv copy missing");
            continue;
        };
        let original = Trace::parse(&text, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(original.format(), format, "{name}: detected format");
        let copy = Trace::parse(&tsv_text, None).unwrap_or_else(|e| panic!("{name}.tsv: {e}"));
        assert_eq!(copy.format(), TraceFormat::Series);

        let ours = original.rate_series(interval);
        let theirs = copy.rate_series(interval);
        // The copies also carry mahimahi's final partial bin; we emit complete bins only.
        let extra = usize::from(format == TraceFormat::Mahimahi);
        assert_eq!(ours.len() + extra, theirs.len(), "{name}: bin count");
        for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            let ours_mbps = a.mbps() * factor;
            let diff = (ours_mbps - b.mbps()).abs();
            // 4 decimals in the copy, plus whole-bit/s rounding on both sides.
            assert!(
                diff <= 0.5e-4 + 1e-5 * factor,
                "{name}: bin {k} ({:.1} s): ours {ours_mbps:.6} Mbit/s, .tsv {:.6}",
                k as f64 * 0.1,
                b.mbps()
            );
        }
        checked += 1;
    }
    eprintln!("checked {checked} trace/.tsv pairs");
}
