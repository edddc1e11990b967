//! The catalog: the resources and the admission policy in force, which
//! operators change through the API (`/v1/resources`, `/v1/policy`).
//!
//! The owner task applies a [`Change`] to its book (a capacity is lowered
//! only if everything held or committed still fits, else 409), writes it to
//! the store's `operator_settings` (migration 0004) before answering, and
//! publishes the new [`Catalog`] on a watch channel the handlers read to
//! check requests. At start the stored settings are applied over the
//! configuration file's, so what an operator changed survives a restart.
//! The bodies here ([`ResourceView`], [`ResourceRequest`], [`PolicyView`])
//! are part of the OpenAPI document.

use std::collections::BTreeMap;

use braid_core::reserve::{Book, Limits, Policy, ReserveError};
use braid_core::{Bandwidth, Duration};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::config::{parse_duration, ResourceConfig, ResourceKind};
use crate::store::{Store, StoreError};

/// The resources and the policy in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    /// The resources, the configuration's first, then those added.
    pub resources: Vec<ResourceConfig>,
    /// The admission policy.
    pub policy: Policy,
}

impl Catalog {
    /// The resource called `name`.
    pub fn resource(&self, name: &str) -> Option<&ResourceConfig> {
        self.resources.iter().find(|r| r.name == name)
    }
}

/// An operator's change.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Change {
    /// Add a resource.
    Add(ResourceConfig),
    /// Change a resource's kind or capacity.
    Set {
        /// The resource.
        name: String,
        /// Its new kind.
        kind: Option<ResourceKind>,
        /// Its new capacity.
        capacity: Option<Bandwidth>,
    },
    /// Replace the policy.
    Policy(Policy),
}

/// A refused change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The book refused (unknown or duplicate resource, over-admission).
    #[error(transparent)]
    Book(#[from] ReserveError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored setting does not decode.
    #[error("stored setting {key}: {error}")]
    Corrupt {
        /// Its key.
        key: String,
        /// Why.
        error: String,
    },
}

/// A resource as stored in `operator_settings`.
#[derive(Debug, Serialize, Deserialize)]
struct StoredResource {
    kind: ResourceKind,
    capacity_bps: u64,
}

const RESOURCE_KEY: &str = "resource:";
const POLICY_KEY: &str = "policy";

/// Applies the stored settings over `catalog` and `book` (at start,
/// before reservations are restored).
///
/// # Errors
/// [`CatalogError`].
pub async fn load(
    store: &Store,
    book: &mut Book,
    catalog: &mut Catalog,
) -> Result<(), CatalogError> {
    for (key, value) in store.settings().await? {
        let corrupt = |e: serde_json::Error| CatalogError::Corrupt {
            key: key.clone(),
            error: e.to_string(),
        };
        if let Some(name) = key.strip_prefix(RESOURCE_KEY) {
            let r: StoredResource = serde_json::from_str(&value).map_err(corrupt)?;
            let capacity = Bandwidth::from_bps(r.capacity_bps);
            match catalog.resources.iter_mut().find(|c| c.name == name) {
                Some(c) => {
                    book.set_capacity(name, capacity)?;
                    c.capacity = capacity;
                    c.kind = r.kind;
                }
                None => {
                    book.add_resource(name, capacity)?;
                    catalog.resources.push(ResourceConfig::plain(
                        name.to_string(),
                        r.kind,
                        capacity,
                    ));
                }
            }
        } else if key == POLICY_KEY {
            let policy: Policy = serde_json::from_str(&value).map_err(corrupt)?;
            book.set_policy(policy.clone());
            catalog.policy = policy;
        }
    }
    Ok(())
}

/// Applies `change` to `book` and `catalog` and stores it; nothing changes
/// if it is refused.
///
/// # Errors
/// [`CatalogError`]: a store failure after the book changed is returned
/// too (the owner task stops on it, as on any store failure).
pub async fn apply(
    store: &Store,
    book: &mut Book,
    catalog: &mut Catalog,
    change: Change,
) -> Result<(), CatalogError> {
    match change {
        Change::Add(r) => {
            book.add_resource(&r.name, r.capacity)?;
            store_resource(store, &r).await?;
            catalog.resources.push(r);
        }
        Change::Set {
            name,
            kind,
            capacity,
        } => {
            let mut r = catalog
                .resource(&name)
                .cloned()
                .ok_or_else(|| ReserveError::UnknownResource(name.clone()))?;
            if let Some(c) = capacity {
                book.set_capacity(&name, c)?;
                r.capacity = c;
            }
            if let Some(k) = kind {
                r.kind = k;
            }
            store_resource(store, &r).await?;
            if let Some(slot) = catalog.resources.iter_mut().find(|c| c.name == name) {
                *slot = r;
            }
        }
        Change::Policy(p) => {
            let json = serde_json::to_string(&p).map_err(|e| CatalogError::Corrupt {
                key: POLICY_KEY.into(),
                error: e.to_string(),
            })?;
            store.put_setting(POLICY_KEY, &json).await?;
            book.set_policy(p.clone());
            catalog.policy = p;
        }
    }
    Ok(())
}

async fn store_resource(store: &Store, r: &ResourceConfig) -> Result<(), CatalogError> {
    let json = serde_json::to_string(&StoredResource {
        kind: r.kind,
        capacity_bps: r.capacity.bps(),
    })
    .map_err(|e| CatalogError::Corrupt {
        key: r.name.clone(),
        error: e.to_string(),
    })?;
    store
        .put_setting(&format!("{RESOURCE_KEY}{}", r.name), &json)
        .await?;
    Ok(())
}

/// A resource as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ResourceView {
    /// Its name.
    pub name: String,
    /// network | cpu | storage.
    pub kind: String,
    /// Its reservable capacity, as braid writes rates.
    pub capacity: String,
    /// The same in bits per second.
    pub capacity_bps: u64,
}

impl From<&ResourceConfig> for ResourceView {
    fn from(r: &ResourceConfig) -> ResourceView {
        ResourceView {
            name: r.name.clone(),
            kind: serde_json::to_value(r.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            capacity: r.capacity.to_string(),
            capacity_bps: r.capacity.bps(),
        }
    }
}

/// `POST /v1/resources` (all fields) and `PATCH /v1/resources` (`name`
/// and what changes).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceRequest {
    /// The resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// network | cpu | storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The reservable capacity, e.g. "100mbit".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
}

/// One scope's limits; absent is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsView {
    /// The largest rate of one request, e.g. "50mbit".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_request: Option<String>,
    /// The largest rate held and committed at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<String>,
    /// The longest reservation, e.g. "1h".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// How far ahead a reservation may start, e.g. "24h".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advance: Option<String>,
}

/// `GET` / `PUT /v1/policy`: the same shape as the configuration's
/// `[policy]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyView {
    /// Every user without their own limits.
    #[serde(default)]
    pub user_default: LimitsView,
    /// Named users.
    #[serde(default)]
    pub users: BTreeMap<String, LimitsView>,
    /// Every domain without its own limits.
    #[serde(default)]
    pub domain_default: LimitsView,
    /// Named domains.
    #[serde(default)]
    pub domains: BTreeMap<String, LimitsView>,
}

impl From<&Limits> for LimitsView {
    fn from(l: &Limits) -> LimitsView {
        LimitsView {
            rate_per_request: l.rate_per_request.map(|r| r.to_string()),
            total: l.total.map(|r| r.to_string()),
            duration: l.duration.map(|d| d.to_string()),
            advance: l.advance.map(|d| d.to_string()),
        }
    }
}

impl From<&Policy> for PolicyView {
    fn from(p: &Policy) -> PolicyView {
        PolicyView {
            user_default: (&p.user_default).into(),
            users: p.users.iter().map(|(k, v)| (k.clone(), v.into())).collect(),
            domain_default: (&p.domain_default).into(),
            domains: p
                .domains
                .iter()
                .map(|(k, v)| (k.clone(), v.into()))
                .collect(),
        }
    }
}

impl LimitsView {
    /// The limits, or the field at fault and why.
    ///
    /// # Errors
    /// (field, reason).
    pub fn limits(&self, scope: &str) -> Result<Limits, (String, String)> {
        let rate = |f: &str, v: &Option<String>| -> Result<Option<Bandwidth>, (String, String)> {
            v.as_deref()
                .map(|t| match t.parse::<Bandwidth>() {
                    Ok(r) if r > Bandwidth::ZERO => Ok(r),
                    Ok(_) => Err((format!("{scope}.{f}"), "must be above zero".to_string())),
                    Err(e) => Err((format!("{scope}.{f}"), e.to_string())),
                })
                .transpose()
        };
        let duration =
            |f: &str, v: &Option<String>| -> Result<Option<Duration>, (String, String)> {
                v.as_deref()
                    .map(|t| parse_duration(t).map_err(|e| (format!("{scope}.{f}"), e)))
                    .transpose()
            };
        Ok(Limits {
            rate_per_request: rate("rate_per_request", &self.rate_per_request)?,
            total: rate("total", &self.total)?,
            duration: duration("duration", &self.duration)?,
            advance: duration("advance", &self.advance)?,
        })
    }
}

impl PolicyView {
    /// The policy, or the field at fault and why.
    ///
    /// # Errors
    /// (field, reason).
    pub fn policy(&self) -> Result<Policy, (String, String)> {
        let map = |prefix: &str, m: &BTreeMap<String, LimitsView>| {
            m.iter()
                .map(|(k, v)| Ok((k.clone(), v.limits(&format!("{prefix}.{k}"))?)))
                .collect::<Result<BTreeMap<_, _>, (String, String)>>()
        };
        Ok(Policy {
            user_default: self.user_default.limits("user_default")?,
            users: map("users", &self.users)?,
            domain_default: self.domain_default.limits("domain_default")?,
            domains: map("domains", &self.domains)?,
        })
    }
}
