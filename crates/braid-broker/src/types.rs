//! The API's request and response bodies, from which the OpenAPI document
//! is generated (utoipa), and the view of a book record the API shows.
//!
//! Rates travel as braid writes them ("10mbit"), with the exact bits per
//! second beside them in responses; times as RFC 3339 (or "now" in
//! requests). Request fields are all optional here so that a missing one is
//! answered with a 400 naming it rather than a generic decode error.

use braid_core::reserve::{Reservation, Version};
use braid_core::Bandwidth;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::clock;
use crate::enforce::{Binding, Flow, FlowError};

/// `POST /v1/reservations`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    /// The resource to reserve (or give `resources`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Several resources, all held or none (a co-reservation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// The rate, e.g. "10mbit".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// RFC 3339, or "now" (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// "foreground" (the default) or "background".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// A URL to which state changes are posted as JSON events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback: Option<String>,
    /// The traffic a network reservation is enforced on (an htb class and a
    /// u32 filter on the resource's device, when the broker runs with
    /// `--enforce`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowSpec>,
    /// The process a CPU reservation is enforced on (moved into a cgroup
    /// with the reserved quota); operators only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// A flow: `{"src":"10.0.0.1","dst":"10.0.0.2","proto":"tcp","dport":5000}`.
/// Addresses may be prefixes (`10.0.0.0/24`), IPv4 or IPv6; what is left
/// out (or a port of 0) matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Source address or prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Destination address or prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// "tcp" or "udp".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<String>,
    /// Source port (0 = any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    /// Destination port (0 = any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
}

impl FlowSpec {
    /// The checked flow.
    ///
    /// # Errors
    /// [`FlowError`] naming the field.
    pub fn parse(&self) -> Result<Flow, FlowError> {
        Flow::parse(
            self.src.as_deref(),
            self.dst.as_deref(),
            self.proto.as_deref(),
            self.sport,
            self.dport,
        )
    }

    /// A stored flow, as the API shows it.
    pub fn of(f: &Flow) -> FlowSpec {
        FlowSpec {
            src: f.src.map(|p| p.to_string()),
            dst: f.dst.map(|p| p.to_string()),
            proto: f.proto.and_then(|p| {
                serde_json::to_value(p)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
            }),
            sport: Some(f.sport).filter(|p| *p != 0),
            dport: Some(f.dport).filter(|p| *p != 0),
        }
    }
}

/// `PATCH /v1/reservations/{id}`: a new version with another rate or end.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModifyRequest {
    /// The new rate, e.g. "20mbit".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// The new end, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
}

/// The answer to `POST /v1/reservations`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Created {
    /// The reservation (the first one of a co-reservation).
    pub id: u64,
    /// Every reservation made, one per resource.
    pub ids: Vec<u64>,
    /// "held".
    pub state: String,
    /// When the hold runs out unless committed (RFC 3339).
    pub hold_expires: Option<String>,
    /// The co-reservation's group id, when `resources` named more than one:
    /// its parts commit, abort and terminate together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u64>,
    /// The parts held by peer brokers (resources routed to another domain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote: Vec<RemotePart>,
}

/// A part of a reservation held by a peer broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RemotePart {
    /// The peer, by its name in the configuration.
    pub peer: String,
    /// The resource at the peer.
    pub resource: String,
    /// The reservation's id at the peer.
    pub id: u64,
}

/// One version of a reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VersionView {
    /// Its number (0 first, higher for modifications).
    pub number: u32,
    /// The rate, as braid writes rates.
    pub rate: String,
    /// The rate in bits per second.
    pub rate_bps: u64,
    /// RFC 3339.
    pub start: String,
    /// RFC 3339.
    pub end: String,
}

/// A reservation as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReservationView {
    /// Its id.
    pub id: u64,
    /// The owner.
    pub user: String,
    /// The owner's domain.
    pub domain: String,
    /// The resource.
    pub resource: String,
    /// "foreground" or "background".
    pub class: String,
    /// checking | held | committing | committed | aborted | timed_out.
    pub state: String,
    /// released | provisioned.
    pub provision: String,
    /// created | passed_end_time | terminated | failed.
    pub life: String,
    /// The version in force.
    pub committed: Option<VersionView>,
    /// The version held, waiting for its commit.
    pub pending: Option<VersionView>,
    /// When the held version's hold runs out (RFC 3339).
    pub hold_expires: Option<String>,
    /// A background reservation's current share.
    pub share: Option<String>,
    /// The co-reservation it is a part of, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u64>,
    /// Its parts held by peer brokers, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote: Vec<RemotePart>,
    /// The flow it is enforced on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowSpec>,
    /// The process it is enforced on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// `GET /v1/resources/{name}/availability`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Availability {
    /// The resource.
    pub resource: String,
    /// Its reservable capacity.
    pub capacity: String,
    /// The interval asked about (RFC 3339).
    pub start: String,
    /// The interval's end (RFC 3339).
    pub end: String,
    /// The largest rate free over the whole interval.
    pub max_free: String,
    /// The same in bits per second.
    pub max_free_bps: u64,
}

/// The query of `GET /v1/resources/{name}/availability`.
#[derive(Debug, Clone, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AvailabilityQuery {
    /// RFC 3339 or "now".
    pub start: Option<String>,
    /// RFC 3339.
    pub end: Option<String>,
}

/// Every error: what went wrong and, for a bad request, the field.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, in one line.
    pub error: String,
    /// The request field at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// One server-sent event (`GET /v1/events`, and callbacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    /// "changed" (the reservation's state changed) or "share" (a
    /// background share changed).
    pub event: String,
    /// The reservation.
    pub id: u64,
    /// Its state after the change ("changed").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationView>,
    /// The new share ("share").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<String>,
}

/// `GET /healthz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// "ok".
    pub status: String,
}

fn name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn version(v: &Version) -> VersionView {
    VersionView {
        number: v.number,
        rate: v.rate.to_string(),
        rate_bps: v.rate.bps(),
        start: clock::format(v.start),
        end: clock::format(v.end),
    }
}

impl ReservationView {
    /// The view of `r`, with its current background `share`.
    pub fn new(r: &Reservation, share: Option<Bandwidth>) -> ReservationView {
        ReservationView {
            id: r.id.0,
            user: r.owner.user.clone(),
            domain: r.owner.domain.clone(),
            resource: r.resource.clone(),
            class: name(&r.class),
            state: name(&r.state),
            provision: name(&r.provision),
            life: name(&r.life),
            committed: r.committed.as_ref().map(version),
            pending: r.pending.as_ref().map(version),
            hold_expires: r.hold_expires.map(clock::format),
            share: share.map(|s| s.to_string()),
            group: None,
            remote: Vec::new(),
            flow: None,
            pid: None,
        }
    }

    /// The view with what it is enforced on.
    pub fn bound(mut self, binding: Option<&Binding>) -> ReservationView {
        if let Some(b) = binding {
            self.flow = b.flow.as_ref().map(FlowSpec::of);
            self.pid = b.pid;
        }
        self
    }
}
