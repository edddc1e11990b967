//! Transport parameters and adaptation reports: the payloads of the
//! INITIAL / HANDSHAKE frames ([`TransportParams`]) and of the ADAPT frame
//! ([`AdaptFrame`], seed 002 §2.3.2's ADAPT_FREQ / ADAPT_PKTSIZE /
//! ADAPT_MARK / ADAPT_WHEN / ADAPT_COND), and the [`Ratio`] they use.
//!
//! Invariants: every field is checked against its bound (named constants
//! in [`super`]) when encoding and when decoding, as in [`super::frame`].

use super::codec::{put_varint, varint_len, Reader, VARINT_MAX};
use super::{
    WireError, MAX_ACK_DELAY_MS, MAX_ADAPT_FACTOR, MAX_DATAGRAM_SIZE, MAX_IDLE_TIMEOUT_MS,
    MAX_MESSAGE_SIZE, MAX_STREAMS, MIN_DATAGRAM_SIZE, RATIO_ONE,
};
use crate::id::StreamId;

/// The ADAPT frame's type byte (see `frame::code`).
pub(super) const ADAPT_CODE: u8 = 0x07;

/// A fraction in parts per [`RATIO_ONE`] (10 000 = 100 %).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Ratio(u16);

impl Ratio {
    /// 0 %.
    pub const ZERO: Ratio = Ratio(0);
    /// 100 %.
    pub const ONE: Ratio = Ratio(RATIO_ONE);

    /// A ratio of `parts` per 10 000, clamped to 100 %.
    pub const fn from_parts(parts: u16) -> Self {
        if parts > RATIO_ONE {
            Ratio(RATIO_ONE)
        } else {
            Ratio(parts)
        }
    }
    /// A ratio from a fraction in `[0, 1]`, rounded; NaN gives zero.
    pub fn from_f64(f: f64) -> Self {
        if f.is_nan() || f <= 0.0 {
            Ratio(0)
        } else if f >= 1.0 {
            Ratio(RATIO_ONE)
        } else {
            Ratio((f * f64::from(RATIO_ONE)).round() as u16)
        }
    }
    /// Parts per 10 000.
    pub const fn parts(self) -> u16 {
        self.0
    }
    /// The fraction in `[0, 1]`.
    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / f64::from(RATIO_ONE)
    }
}

/// Transport parameters, exchanged in INITIAL (client) and HANDSHAKE (server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportParams {
    /// Largest message this endpoint accepts (≤ [`MAX_MESSAGE_SIZE`]).
    pub max_message_size: u64,
    /// Reliable bytes the peer may send before further credit.
    pub initial_max_data: u64,
    /// Fraction of non-reliable messages this endpoint, as receiver,
    /// accepts to lose (seed 002 §2.1: receiver loss tolerance).
    pub loss_tolerance: Ratio,
    /// Idle timeout in milliseconds (0 = none; ≤ [`MAX_IDLE_TIMEOUT_MS`]).
    pub idle_timeout_ms: u64,
    /// Longest this endpoint delays an ACK, in ms (≤ [`MAX_ACK_DELAY_MS`]).
    pub max_ack_delay_ms: u64,
    /// Largest UDP payload this endpoint accepts.
    pub max_datagram_size: u64,
}

impl TransportParams {
    pub(super) fn encoded_len(&self) -> usize {
        varint_len(self.max_message_size)
            + varint_len(self.initial_max_data)
            + varint_len(u64::from(self.loss_tolerance.0))
            + varint_len(self.idle_timeout_ms)
            + varint_len(self.max_ack_delay_ms)
            + varint_len(self.max_datagram_size)
    }

    pub(super) fn validate(&self) -> Result<(), WireError> {
        let bad = |field| Err(WireError::OutOfRange { field });
        if self.max_message_size > MAX_MESSAGE_SIZE {
            return bad("max message size");
        }
        if self.initial_max_data > VARINT_MAX {
            return bad("initial max data");
        }
        if self.loss_tolerance.0 > RATIO_ONE {
            return bad("loss tolerance");
        }
        if self.idle_timeout_ms > MAX_IDLE_TIMEOUT_MS {
            return bad("idle timeout");
        }
        if self.max_ack_delay_ms > MAX_ACK_DELAY_MS {
            return bad("max ack delay");
        }
        if !(MIN_DATAGRAM_SIZE as u64..=MAX_DATAGRAM_SIZE as u64).contains(&self.max_datagram_size)
        {
            return bad("max datagram size");
        }
        Ok(())
    }

    /// Appends the parameters' encoding (also what the authenticated
    /// handshake binds, `transport::auth`).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.max_message_size);
        put_varint(out, self.initial_max_data);
        put_varint(out, u64::from(self.loss_tolerance.0));
        put_varint(out, self.idle_timeout_ms);
        put_varint(out, self.max_ack_delay_ms);
        put_varint(out, self.max_datagram_size);
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let max_message_size = r.varint()?;
        let initial_max_data = r.varint()?;
        let tol = r.varint_max(u64::from(RATIO_ONE), "loss tolerance")?;
        let p = TransportParams {
            max_message_size,
            initial_max_data,
            loss_tolerance: Ratio(tol as u16),
            idle_timeout_ms: r.varint()?,
            max_ack_delay_ms: r.varint()?,
            max_datagram_size: r.varint()?,
        };
        p.validate()?;
        Ok(p)
    }
}

/// What kind of adaptation an application reports (seed 002 §2.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdaptAction {
    /// ADAPT_FREQ: messages are sent `factor` times as often (parts per
    /// 10 000; 5 000 = half as often).
    Frequency {
        /// New frequency over old, in parts per 10 000.
        factor: u32,
    },
    /// ADAPT_PKTSIZE: messages are `factor` times their old size (a
    /// resolution change; 8 000 = reduced by `rate_chg` = 20 %).
    PacketSize {
        /// New size over old, in parts per 10 000.
        factor: u32,
    },
    /// ADAPT_MARK: from now on this fraction of messages is unmarked
    /// (discardable).
    Marking {
        /// Fraction of messages left unmarked.
        unmarked: Ratio,
    },
    /// The receiver changes its loss tolerance.
    LossTolerance {
        /// The new tolerance.
        tolerance: Ratio,
    },
}

/// ADAPT_WHEN: when an adaptation takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdaptWhen {
    /// Already in effect.
    Now,
    /// From message `message` of `stream` on.
    AtMessage {
        /// The stream.
        stream: StreamId,
        /// The first message the adaptation applies to.
        message: u64,
    },
    /// The application will adapt later and will report it again then.
    Deferred,
}

/// ADAPT_COND: the network condition the application assumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptCond {
    /// The error (loss) ratio the adaptation was based on.
    pub error_ratio: Ratio,
    /// The data rate the adaptation was based on, bits per second.
    pub rate_bps: u64,
}

/// ADAPT: an application's report of its own adaptation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptFrame {
    /// What changed and by how much.
    pub action: AdaptAction,
    /// When.
    pub when: AdaptWhen,
    /// The condition the application assumed, if it says.
    pub cond: Option<AdaptCond>,
}

impl AdaptFrame {
    fn parts(&self) -> (u8, u64) {
        match self.action {
            AdaptAction::Frequency { factor } => (0, u64::from(factor)),
            AdaptAction::PacketSize { factor } => (1, u64::from(factor)),
            AdaptAction::Marking { unmarked } => (2, u64::from(unmarked.0)),
            AdaptAction::LossTolerance { tolerance } => (3, u64::from(tolerance.0)),
        }
    }

    pub(super) fn validate(&self) -> Result<(), WireError> {
        let ok = match self.action {
            AdaptAction::Frequency { factor } | AdaptAction::PacketSize { factor } => {
                (1..=MAX_ADAPT_FACTOR).contains(&factor)
            }
            AdaptAction::Marking { unmarked: r } | AdaptAction::LossTolerance { tolerance: r } => {
                r.0 <= RATIO_ONE
            }
        };
        if !ok {
            return Err(WireError::OutOfRange {
                field: "adapt value",
            });
        }
        if let AdaptWhen::AtMessage { stream, message } = self.when {
            if stream.0 >= MAX_STREAMS || message > VARINT_MAX {
                return Err(WireError::OutOfRange {
                    field: "adapt when",
                });
            }
        }
        if let Some(c) = self.cond {
            if c.error_ratio.0 > RATIO_ONE || c.rate_bps > VARINT_MAX {
                return Err(WireError::OutOfRange {
                    field: "adapt cond",
                });
            }
        }
        Ok(())
    }

    pub(super) fn encoded_len(&self) -> usize {
        let (_, v) = self.parts();
        let when = match self.when {
            AdaptWhen::AtMessage { stream, message } => {
                varint_len(u64::from(stream.0)) + varint_len(message)
            }
            _ => 0,
        };
        let cond = self.cond.map_or(0, |c| {
            varint_len(u64::from(c.error_ratio.0)) + varint_len(c.rate_bps)
        });
        1 + 1 + varint_len(v) + 1 + when + 1 + cond
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        let (kind, v) = self.parts();
        out.push(ADAPT_CODE);
        out.push(kind);
        put_varint(out, v);
        match self.when {
            AdaptWhen::Now => out.push(0),
            AdaptWhen::AtMessage { stream, message } => {
                out.push(1);
                put_varint(out, u64::from(stream.0));
                put_varint(out, message);
            }
            AdaptWhen::Deferred => out.push(2),
        }
        match self.cond {
            None => out.push(0),
            Some(c) => {
                out.push(1);
                put_varint(out, u64::from(c.error_ratio.0));
                put_varint(out, c.rate_bps);
            }
        }
    }

    pub(super) fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let kind = r.u8()?;
        let v = r.varint()?;
        let factor = || -> Result<u32, WireError> {
            u32::try_from(v).map_err(|_| WireError::OutOfRange {
                field: "adapt value",
            })
        };
        let ratio = || -> Result<Ratio, WireError> {
            if v > u64::from(RATIO_ONE) {
                return Err(WireError::OutOfRange {
                    field: "adapt value",
                });
            }
            Ok(Ratio(v as u16))
        };
        let action = match kind {
            0 => AdaptAction::Frequency { factor: factor()? },
            1 => AdaptAction::PacketSize { factor: factor()? },
            2 => AdaptAction::Marking { unmarked: ratio()? },
            3 => AdaptAction::LossTolerance {
                tolerance: ratio()?,
            },
            _ => return Err(WireError::Reserved),
        };
        let when = match r.u8()? {
            0 => AdaptWhen::Now,
            1 => AdaptWhen::AtMessage {
                stream: StreamId(r.varint_max(u64::from(MAX_STREAMS) - 1, "stream id")? as u32),
                message: r.varint()?,
            },
            2 => AdaptWhen::Deferred,
            _ => return Err(WireError::Reserved),
        };
        let cond = match r.u8()? {
            0 => None,
            1 => Some(AdaptCond {
                error_ratio: Ratio(r.varint_max(u64::from(RATIO_ONE), "error ratio")? as u16),
                rate_bps: r.varint()?,
            }),
            _ => return Err(WireError::Reserved),
        };
        let f = AdaptFrame { action, when, cond };
        f.validate()?;
        Ok(f)
    }
}
