//! Session errors: what an API call refuses, and why a session ended.
//!
//! Main types: [`SessionError`], [`SendRefused`], [`CloseCode`], [`CloseReason`].

use super::frame::FrameError;
use super::stream::StreamConfigError;
use crate::id::{PathId, StreamId};
use crate::scheduler::SchedError;
use crate::transport::ConnectError;

/// Why a session API call was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The stream config is invalid.
    #[error("stream config: {0}")]
    Config(#[from] StreamConfigError),
    /// The scheduler refused.
    #[error("scheduler: {0}")]
    Scheduler(#[from] SchedError),
    /// No such open stream on this side.
    #[error("{0} is not open")]
    UnknownStream(StreamId),
    /// Every stream id is in use.
    #[error("no stream id left (at most {0} streams)")]
    TooManyStreams(u32),
    /// The path id is already in use.
    #[error("{0} is already a path of this session")]
    DuplicatePath(PathId),
    /// No such path.
    #[error("{0} is not a path of this session")]
    UnknownPath(PathId),
    /// The session has its most paths already.
    #[error("a session has at most {0} paths")]
    TooManyPaths(usize),
    /// The transport endpoint refused a connection.
    #[error("connect: {0}")]
    Connect(#[from] ConnectError),
    /// The call is for the other side (e.g. `send` on a sink).
    #[error("{0} is not available on a {1}")]
    WrongRole(&'static str, &'static str),
    /// The session is closed.
    #[error("session closed: {0}")]
    Closed(CloseReason),
    /// A relayed path's route is empty or longer than
    /// [`MAX_ROUTE_HOPS`](super::route::MAX_ROUTE_HOPS).
    #[error("a route of {0} hops (need 1..={max})", max = super::route::MAX_ROUTE_HOPS)]
    Route(usize),
    /// The stream is closing; nothing more may be sent on it.
    #[error("{0} is closing")]
    StreamClosing(StreamId),
    /// The sink refused the stream (its STREAM_VERDICT): nothing of it
    /// counts as delivered.
    #[error("{stream}: refused by the sink: {reason}")]
    StreamRefused {
        /// The stream.
        stream: StreamId,
        /// The sink's reason.
        reason: String,
    },
    /// Another stream of the session has this name (names are unique in a
    /// session, and `stream-N` is the name of stream N only).
    #[error("stream name {0:?} is taken in this session")]
    NameTaken(String),
    /// Sink: the stream has not ended yet, or has a verdict already.
    #[error("{0} cannot be kept now: it has not ended, or its verdict was given")]
    NotEnded(StreamId),
}

/// Why [`Session::send`](super::Session::send) refused a message: the
/// error and the message, handed back untouched.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("send refused: {error}")]
pub struct SendRefused {
    /// Why.
    pub error: SendRefusal,
    /// The message.
    pub data: Vec<u8>,
}

impl SendRefused {
    /// The message back.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// Why one message was refused (see [`SendRefused`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SendRefusal {
    /// The stream's window (messages sent and not yet consumed by the sink
    /// application) is full; try again after the sink consumes.
    #[error("{stream} has {window} messages outstanding (its window)")]
    WindowFull {
        /// The stream.
        stream: StreamId,
        /// Its window.
        window: u32,
    },
    /// The session holds its bound of bytes.
    #[error("the session holds {held} bytes (bound {bound})")]
    SessionFull {
        /// Bytes held now.
        held: u64,
        /// The bound.
        bound: u64,
    },
    /// The message is larger than the session's maximum.
    #[error("message of {size} bytes exceeds the session maximum of {max}")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// Any other reason.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Why a session ended, as the number carried in a CLOSE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseCode {
    /// Normal end.
    Done,
    /// The peer sent a frame that did not decode.
    BadFrame,
    /// The peer broke the session protocol (a window exceeded, an ack
    /// beyond what was sent, data for an unknown stream).
    ProtocolViolation,
    /// The application closed the session.
    Application,
    /// A code this side does not know.
    Other(u64),
}

impl CloseCode {
    /// The wire value.
    pub fn to_wire(self) -> u64 {
        match self {
            CloseCode::Done => 0,
            CloseCode::BadFrame => 1,
            CloseCode::ProtocolViolation => 2,
            CloseCode::Application => 3,
            CloseCode::Other(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_wire(v: u64) -> Self {
        match v {
            0 => CloseCode::Done,
            1 => CloseCode::BadFrame,
            2 => CloseCode::ProtocolViolation,
            3 => CloseCode::Application,
            v => CloseCode::Other(v),
        }
    }
}

/// Why a session is over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// This side closed it.
    #[error("closed here ({code:?}): {reason}")]
    Local {
        /// Why, as a code.
        code: CloseCode,
        /// Why, in words.
        reason: String,
    },
    /// The peer closed it.
    #[error("closed by the peer ({code:?}): {reason}")]
    Peer {
        /// Why, as a code.
        code: CloseCode,
        /// Why, in words (lossy UTF-8).
        reason: String,
    },
    /// Every path has been down for
    /// [`SessionConfig::peer_timeout`](super::SessionConfig::peer_timeout):
    /// the peer is gone (killed, or every network path to it cut).
    #[error("every path has been down for {0}: the peer is gone")]
    PeerLost(crate::time::Duration),
}

impl From<FrameError> for CloseReason {
    fn from(e: FrameError) -> Self {
        CloseReason::Local {
            code: CloseCode::BadFrame,
            reason: e.to_string(),
        }
    }
}
