//! The convergence loop: for each configured certificate, decide the next action from the
//! stored state, the installed files and (only when needed) the API, and carry it out —
//! order, validate, wait, download, install, reissue — with billing safety throughout.

pub mod keys;
pub mod order;
pub mod plan;
pub mod run;
