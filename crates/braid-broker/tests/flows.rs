//! Whose traffic a reservation may touch (issue 29 §4): a user reserves
//! flows only inside the addresses `[flows]` grants them and no wider
//! than `widest_prefix_v4`; no reservation overlaps another user's flow;
//! on a resource whose classes do not borrow, no two reservations
//! overlap at all. Operators are bound by overlap, not by grants. The
//! checks are at creation, so no `--enforce` is needed to see them.

use std::path::Path;

use braid_broker::client::ClientError;
use braid_broker::types::{CreateRequest, FlowSpec};
use braid_broker::{Broker, Client, Role};

mod start;
use reqwest::StatusCode;

const CONFIG: &str = "[flows.users]\nalice = [\"10.77.1.0/24\"]\nbob = [\"10.77.2.0/24\"]\n\
     [flows.groups.lab]\nmembers = [\"alice\", \"bob\"]\naddresses = [\"10.77.9.0/24\"]\n\
     [[resource]]\nname = \"wan\"\nkind = \"network\"\ncapacity = \"100mbit\"\ndevice = \"eth9\"\n\
     [[resource]]\nname = \"tight\"\nkind = \"network\"\ncapacity = \"100mbit\"\ndevice = \"eth8\"\nborrow = false\n";

async fn start(db: &Path) -> Broker {
    start::start_broker(CONFIG, db).await
}

fn client(b: &Broker, user: &str, role: Role) -> Client {
    start::client_for(b, user, role)
}

fn on(resource: &str, rate: &str, src: Option<&str>, dst: Option<&str>) -> CreateRequest {
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    CreateRequest {
        resource: Some(resource.into()),
        rate: Some(rate.into()),
        end: Some(end),
        flow: Some(FlowSpec {
            src: src.map(str::to_string),
            dst: dst.map(str::to_string),
            proto: Some("tcp".into()),
            dport: Some(5201),
            ..FlowSpec::default()
        }),
        ..CreateRequest::default()
    }
}

/// The status, field and message of a refusal.
async fn refused(c: &Client, req: CreateRequest) -> (StatusCode, String, String) {
    match c.create(&req).await {
        Err(ClientError::Api {
            status,
            field,
            error,
        }) => (status, field.unwrap_or_default(), error),
        Err(other) => panic!("expected an API error, got {other}"),
        Ok(made) => panic!("expected a refusal, got reservation {}", made.id),
    }
}

/// The probe's attack: bob reserves 1 mbit on alice's flow (hers: 50
/// mbit), on a /16 around it, on 0.0.0.0/0.
#[tokio::test]
async fn a_user_cannot_reserve_another_users_flow_or_a_wide_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(&dir.path().join("b.db")).await;
    let alice = client(&broker, "alice", Role::User);
    let bob = client(&broker, "bob", Role::User);
    let carol = client(&broker, "carol", Role::User);
    let ops = client(&broker, "ops", Role::Operator);
    let victim = Some("10.77.1.5");
    alice
        .create(&on("wan", "50mbit", victim, None))
        .await
        .expect("alice reserves her own flow");

    // Traffic only from alice's host: not bob's to reserve.
    let (status, field, error) = refused(&bob, on("wan", "1mbit", victim, None)).await;
    assert_eq!(
        (status, field.as_str()),
        (StatusCode::FORBIDDEN, "flow"),
        "{error}"
    );
    assert!(
        error.contains("10.77.2.0/24"),
        "names what bob may: {error}"
    );
    // From alice's host to bob's: bob's to reserve, but alice's
    // reservation already covers it.
    let (status, field, error) = refused(&bob, on("wan", "1mbit", victim, Some("10.77.2.9"))).await;
    assert_eq!(
        (status, field.as_str()),
        (StatusCode::CONFLICT, "flow"),
        "{error}"
    );
    assert!(error.contains("another user"), "{error}");
    // Whole prefixes.
    for (src, dst, want) in [
        (Some("10.77.0.0/16"), None, "flow.src"),
        (Some("0.0.0.0/0"), None, "flow.src"),
        (Some("10.77.2.9"), Some("0.0.0.0/0"), "flow.dst"),
    ] {
        let (status, field, error) = refused(&bob, on("wan", "1mbit", src, dst)).await;
        assert_eq!(
            (status, field.as_str()),
            (StatusCode::FORBIDDEN, want),
            "{error}"
        );
        assert!(error.contains("wider than /24"), "{error}");
    }
    // No grant: no flow at all.
    let (status, field, error) = refused(&carol, on("wan", "1mbit", Some("10.77.3.1"), None)).await;
    assert_eq!(
        (status, field.as_str()),
        (StatusCode::FORBIDDEN, "flow"),
        "{error}"
    );
    assert!(error.contains("(none)"), "{error}");
    // An operator reserves any prefix, but not over alice's flow.
    let (status, field, error) = refused(&ops, on("wan", "1mbit", Some("0.0.0.0/0"), None)).await;
    assert_eq!(
        (status, field.as_str()),
        (StatusCode::CONFLICT, "flow"),
        "{error}"
    );
    ops.create(&on("wan", "1mbit", Some("192.0.2.0/24"), None))
        .await
        .expect("an operator's wide prefix that overlaps nobody");
    // Bob's own traffic is his.
    bob.create(&on("wan", "10mbit", Some("10.77.2.9"), None))
        .await
        .expect("bob reserves his own flow");
    broker.stop().await;
}

/// Inside a group's shared prefix the first reservation wins; one's own
/// reservations may overlap where classes borrow, never where they are
/// capped (`borrow = false`); a finished reservation covers nothing.
#[tokio::test]
async fn overlapping_flows_are_refused_across_users_and_where_classes_are_capped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = start(&dir.path().join("b.db")).await;
    let alice = client(&broker, "alice", Role::User);
    let bob = client(&broker, "bob", Role::User);
    let host = Some("10.77.9.1");
    let net = Some("10.77.9.0/24");
    let first = alice
        .create(&on("tight", "50mbit", host, None))
        .await
        .expect("the first in the shared prefix")
        .id;
    let (status, field, error) = refused(&bob, on("tight", "1mbit", net, None)).await;
    assert_eq!(
        (status, field.as_str()),
        (StatusCode::CONFLICT, "flow"),
        "{error}"
    );
    let (status, field, error) = refused(&alice, on("tight", "1mbit", net, None)).await;
    assert_eq!(
        (status, field.as_str()),
        (StatusCode::CONFLICT, "flow"),
        "{error}"
    );
    assert!(error.contains("borrow = false"), "{error}");
    assert!(error.contains(&format!("reservation {first}")), "{error}");
    // Where classes borrow, alice's own may overlap; bob's still not.
    alice
        .create(&on("wan", "50mbit", host, None))
        .await
        .expect("alice on wan");
    alice
        .create(&on("wan", "1mbit", net, None))
        .await
        .expect("alice's own overlap where classes borrow");
    let (status, _, error) = refused(&bob, on("wan", "1mbit", Some("10.77.9.1"), None)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{error}");
    // Once alice's first is over, the prefix is free on "tight".
    alice.terminate(first).await.expect("terminate");
    alice
        .create(&on("tight", "1mbit", net, None))
        .await
        .expect("nothing left to overlap");
    broker.stop().await;
}
