//! isobench: what does this sandbox and this storage stack cost my workload?
//! See DESIGN.md for the concepts and the data flow.

pub mod agent;
pub mod cli;
pub mod compare;
pub mod doctor;
pub mod env;
pub mod facts;
pub mod history;
pub mod kinds;
pub mod ledger;
pub mod net;
pub mod plan;
pub mod proof;
pub mod report;
pub mod result_sets;
pub mod runner;
pub mod secrets;
pub mod server;
pub mod store;
pub mod suite;
pub mod syntax;
pub mod sys;
pub mod volume;
pub mod workload;
