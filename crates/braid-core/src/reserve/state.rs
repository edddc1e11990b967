//! The three state machines of a reservation, after the OGF NSI Connection
//! Service v2: reservation, provisioning and life.
//!
//! Each machine is a small enum with one pure `step` function; every pair of
//! (state, input) not in the table is a [`TransitionError`] naming both. The
//! [`crate::reserve::Book`] runs the machines; nothing else changes a state.
//!
//! | machine | transitions |
//! | --- | --- |
//! | [`ReservationState`] | checking → held (admitted) or back (refused); held → committing → committed; held → aborted / timed out (or back to committed when a modification of a committed reservation is aborted or times out); committed → checking (modify) |
//! | [`ProvisionState`] | released ↔ provisioned |
//! | [`LifeState`] | created → passed end time / terminated / failed; passed end time and failed → terminated |
//!
//! Differences from NSI, on purpose: the book checks synchronously, so
//! `checking` and `committing` last for one call; NSI's "reserve timeout"
//! state, which waits for the requester's abort, is folded into
//! [`ReservationState::TimedOut`] (a first version) or a return to
//! [`ReservationState::Committed`] (a modification, the old version in
//! force), and the book announces it with an event instead.

use core::fmt;

/// Where a reservation's request stands (NSI's reservation state machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReservationState {
    /// Admission is being checked (a first version or a modification).
    Checking,
    /// Admitted and holding its capacity until committed, aborted or timed out.
    Held,
    /// Being committed.
    Committing,
    /// A committed version is in force, nothing pending.
    Committed,
    /// The first version was aborted or refused; nothing is reserved.
    Aborted,
    /// The first version's hold ran out before a commit; nothing is reserved.
    TimedOut,
}

/// What drives the reservation machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReservationInput {
    /// A modification of a committed reservation was asked for.
    Modify,
    /// Admission said yes.
    Admit,
    /// Admission (capacity or policy) said no.
    Refuse,
    /// The requester commits the held version.
    Commit,
    /// The commit is done.
    CommitDone,
    /// The requester aborts the held version.
    Abort,
    /// The hold time ran out.
    Expire,
}

/// Whether a reservation carries traffic (NSI's provisioning machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvisionState {
    /// Not enforced on the data plane (the initial state).
    Released,
    /// Enforced on the data plane while the reservation is active.
    Provisioned,
}

/// What drives the provisioning machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvisionInput {
    /// Provision the reservation.
    Provision,
    /// Release it.
    Release,
}

/// A reservation's life (NSI's lifecycle machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifeState {
    /// Alive: may be held, committed, provisioned, modified.
    Created,
    /// The end time of the version in force has passed.
    PassedEndTime,
    /// Terminated by its owner or an operator.
    Terminated,
    /// Failed (the driver reported that it cannot be enforced).
    Failed,
}

/// What drives the life machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LifeInput {
    /// The end time passed.
    EndTime,
    /// Terminate.
    Terminate,
    /// Enforcement failed.
    Fail,
}

/// An input that the machine's current state does not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransitionError {
    /// Not accepted by the reservation machine.
    #[error("cannot {input} a reservation that is {from}")]
    Reservation {
        /// The state the machine was in.
        from: ReservationState,
        /// The refused input.
        input: ReservationInput,
    },
    /// Not accepted by the provisioning machine.
    #[error("cannot {input} a reservation that is {from}")]
    Provision {
        /// The state the machine was in.
        from: ProvisionState,
        /// The refused input.
        input: ProvisionInput,
    },
    /// Not accepted by the life machine.
    #[error("cannot {input} a reservation that is {from}")]
    Life {
        /// The state the machine was in.
        from: LifeState,
        /// The refused input.
        input: LifeInput,
    },
}

impl ReservationState {
    /// The state after `input`. `in_force` says whether a committed version
    /// exists: a refused, aborted or expired modification returns to
    /// [`ReservationState::Committed`] rather than ending the reservation.
    ///
    /// # Errors
    /// [`TransitionError::Reservation`] for an input the state does not take.
    pub fn step(self, input: ReservationInput, in_force: bool) -> Result<Self, TransitionError> {
        use ReservationInput as I;
        use ReservationState as S;
        let back = if in_force { S::Committed } else { S::Aborted };
        Ok(match (self, input) {
            (S::Committed, I::Modify) => S::Checking,
            (S::Checking, I::Admit) => S::Held,
            (S::Checking, I::Refuse) => back,
            (S::Held, I::Commit) => S::Committing,
            (S::Committing, I::CommitDone) => S::Committed,
            (S::Held, I::Abort) => back,
            (S::Held, I::Expire) if in_force => S::Committed,
            (S::Held, I::Expire) => S::TimedOut,
            (from, input) => return Err(TransitionError::Reservation { from, input }),
        })
    }

    /// Whether the machine can take no further input.
    pub fn is_final(self) -> bool {
        matches!(self, ReservationState::Aborted | ReservationState::TimedOut)
    }
}

impl ProvisionState {
    /// The state after `input`.
    ///
    /// # Errors
    /// [`TransitionError::Provision`] when provisioning what is provisioned
    /// or releasing what is released.
    pub fn step(self, input: ProvisionInput) -> Result<Self, TransitionError> {
        match (self, input) {
            (ProvisionState::Released, ProvisionInput::Provision) => {
                Ok(ProvisionState::Provisioned)
            }
            (ProvisionState::Provisioned, ProvisionInput::Release) => Ok(ProvisionState::Released),
            (from, input) => Err(TransitionError::Provision { from, input }),
        }
    }
}

impl LifeState {
    /// The state after `input`.
    ///
    /// # Errors
    /// [`TransitionError::Life`] for an input the state does not take (all
    /// inputs once terminated).
    pub fn step(self, input: LifeInput) -> Result<Self, TransitionError> {
        use LifeInput as I;
        use LifeState as S;
        Ok(match (self, input) {
            (S::Created, I::EndTime) => S::PassedEndTime,
            (S::Created, I::Fail) => S::Failed,
            (S::Created | S::PassedEndTime | S::Failed, I::Terminate) => S::Terminated,
            (from, input) => return Err(TransitionError::Life { from, input }),
        })
    }

    /// Whether the reservation is still alive.
    pub fn is_created(self) -> bool {
        self == LifeState::Created
    }
}

macro_rules! display_snake {
    ($($ty:ty { $($v:ident => $s:literal),* $(,)? })*) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $(Self::$v => $s),* })
            }
        }
    )*};
}

display_snake! {
    ReservationState {
        Checking => "checking", Held => "held", Committing => "committing",
        Committed => "committed", Aborted => "aborted", TimedOut => "timed out",
    }
    ReservationInput {
        Modify => "modify", Admit => "admit", Refuse => "refuse", Commit => "commit",
        CommitDone => "finish committing", Abort => "abort", Expire => "expire",
    }
    ProvisionState { Released => "released", Provisioned => "provisioned" }
    ProvisionInput { Provision => "provision", Release => "release" }
    LifeState {
        Created => "created", PassedEndTime => "past its end time",
        Terminated => "terminated", Failed => "failed",
    }
    LifeInput { EndTime => "pass the end time of", Terminate => "terminate", Fail => "fail" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReservationInput as I;
    use ReservationState as S;

    const ALL_S: [S; 6] = [
        S::Checking,
        S::Held,
        S::Committing,
        S::Committed,
        S::Aborted,
        S::TimedOut,
    ];
    const ALL_I: [I; 7] = [
        I::Modify,
        I::Admit,
        I::Refuse,
        I::Commit,
        I::CommitDone,
        I::Abort,
        I::Expire,
    ];

    #[test]
    fn first_version_path() {
        let s = S::Checking.step(I::Admit, false).unwrap();
        assert_eq!(s, S::Held);
        let s = s.step(I::Commit, false).unwrap();
        assert_eq!(s, S::Committing);
        assert_eq!(s.step(I::CommitDone, false).unwrap(), S::Committed);
        assert_eq!(S::Held.step(I::Abort, false).unwrap(), S::Aborted);
        assert_eq!(S::Held.step(I::Expire, false).unwrap(), S::TimedOut);
        assert_eq!(S::Checking.step(I::Refuse, false).unwrap(), S::Aborted);
    }

    #[test]
    fn modification_falls_back_to_committed() {
        assert_eq!(S::Committed.step(I::Modify, true).unwrap(), S::Checking);
        assert_eq!(S::Checking.step(I::Refuse, true).unwrap(), S::Committed);
        assert_eq!(S::Held.step(I::Abort, true).unwrap(), S::Committed);
        assert_eq!(S::Held.step(I::Expire, true).unwrap(), S::Committed);
    }

    #[test]
    fn every_other_pair_is_an_error() {
        let legal = [
            (S::Committed, I::Modify),
            (S::Checking, I::Admit),
            (S::Checking, I::Refuse),
            (S::Held, I::Commit),
            (S::Committing, I::CommitDone),
            (S::Held, I::Abort),
            (S::Held, I::Expire),
        ];
        for s in ALL_S {
            for i in ALL_I {
                let r = s.step(i, true);
                assert_eq!(r.is_ok(), legal.contains(&(s, i)), "{s} {i}");
                if let Err(e) = r {
                    assert_eq!(e, TransitionError::Reservation { from: s, input: i });
                }
            }
        }
        assert!(S::Aborted.is_final() && S::TimedOut.is_final() && !S::Held.is_final());
        assert_eq!(
            S::Committed.step(I::Commit, true).unwrap_err().to_string(),
            "cannot commit a reservation that is committed"
        );
    }

    #[test]
    fn provisioning_toggles() {
        let p = ProvisionState::Released
            .step(ProvisionInput::Provision)
            .unwrap();
        assert_eq!(p, ProvisionState::Provisioned);
        assert!(p.step(ProvisionInput::Provision).is_err());
        let p = p.step(ProvisionInput::Release).unwrap();
        assert_eq!(
            p.step(ProvisionInput::Release),
            Err(TransitionError::Provision {
                from: ProvisionState::Released,
                input: ProvisionInput::Release
            })
        );
    }

    #[test]
    fn life_ends_once() {
        use LifeInput as L;
        use LifeState as F;
        assert_eq!(F::Created.step(L::EndTime).unwrap(), F::PassedEndTime);
        assert_eq!(F::Created.step(L::Fail).unwrap(), F::Failed);
        for s in [F::Created, F::PassedEndTime, F::Failed] {
            assert_eq!(s.step(L::Terminate).unwrap(), F::Terminated);
        }
        for i in [L::EndTime, L::Terminate, L::Fail] {
            assert!(F::Terminated.step(i).is_err());
        }
        assert!(F::PassedEndTime.step(L::EndTime).is_err());
        assert!(F::Failed.step(L::Fail).is_err());
        assert!(F::Created.is_created() && !F::Failed.is_created());
    }
}
