//! `braid::session::store` on loopback: a sink that keeps each stream in a
//! file of its own, confirms a stream only once it is written and synced,
//! and refuses one whose file exists (the source hears why).

use braid::session::store::{DirSink, Ending, FileQuotas};
use braid::session::{ListenerConfig, PathConfig, Session, SessionConfig, SessionListener};
use braid_core::scheduler::StreamSpec;
use braid_core::session::StreamConfig;
use braid_core::Duration;

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_kept_in_their_files_and_an_existing_file_refuses_its_stream() {
    let dir = tempdir("kept");
    std::fs::write(dir.join("taken"), b"not yours").unwrap();
    let mut config = ListenerConfig::default();
    config.core.confirm_streams = true;
    let mut listener = SessionListener::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let addr = listener.local_addr();
    let sink = DirSink {
        out: Some(dir.clone()),
        force: false,
        files: FileQuotas::new(Some(8), None),
    };
    let receiving = tokio::spawn(async move {
        let incoming = listener.accept().await.unwrap();
        let mut snapshots = 0;
        let outcome = sink
            .receive(
                incoming,
                Duration::from_millis(100),
                std::future::pending(),
                &mut |_| snapshots += 1,
            )
            .await
            .unwrap();
        (outcome, snapshots)
    });

    let session = Session::connect(
        addr,
        SessionConfig {
            paths: vec![PathConfig::direct()],
            ..SessionConfig::default()
        },
    )
    .await
    .unwrap();
    let be = StreamSpec::best_effort(1).unwrap();
    let mut atoms = session
        .open_stream(StreamConfig::new(be).with_name("atoms"))
        .await
        .unwrap();
    let mut taken = session
        .open_stream(StreamConfig::new(be).with_name("taken"))
        .await
        .unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    for chunk in data.chunks(10_000) {
        atoms.send(chunk.to_vec().into()).await.unwrap();
    }
    atoms.finish().await.unwrap();
    // The sink refuses `taken` at its first message: sending or finishing
    // it fails with the sink's reason.
    let refused = match taken.send(vec![1u8; 1000].into()).await {
        Err(e) => e.to_string(),
        Ok(()) => taken.finish().await.unwrap_err().to_string(),
    };
    assert!(refused.contains("exists"), "{refused}");
    session.close().await.unwrap();

    let (outcome, snapshots) = receiving.await.unwrap();
    assert!(snapshots > 0, "no snapshot was shown");
    let by_name = |n: &str| outcome.streams.iter().find(|s| s.name == n).unwrap();
    assert_eq!(by_name("atoms").ending, Ending::Kept, "{outcome:?}");
    assert_eq!(by_name("atoms").bytes, data.len() as u64);
    assert_eq!(std::fs::read(dir.join("atoms")).unwrap(), data);
    assert!(
        matches!(by_name("taken").ending, Ending::Refused(_)),
        "{outcome:?}"
    );
    assert_eq!(
        std::fs::read(dir.join("taken")).unwrap(),
        b"not yours",
        "a file found is never touched"
    );
    assert!(outcome.verdict().unwrap_err().contains("taken"));
    let _ = std::fs::remove_dir_all(&dir);
}
