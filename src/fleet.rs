//! Fleet mode: the hosts of a web farm act as one agent, coordinated through etcd v3. One
//! host leads (an etcd lease) and alone talks to the Partner API; its writes are fenced by the
//! revision of its lead; private keys travel sealed with the fleet key.

pub mod coord;
pub mod key;

pub use coord::{Expect, Fleet, FleetError, FleetOptions, FleetWatch, Leadership, Written};
pub use key::{FleetKey, KeyError};
