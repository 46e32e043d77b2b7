//! The control protocol between the launcher and its PEs: one JSON object per line over the
//! [`crate::link`] stream (a Unix socket in the job's private directory, or TCP), after the
//! hello with the job's secret that opens it.
//!
//! ```text
//!  PE                                launcher
//!  Hello { pe }              ──▶     (after the hello with the secret)
//!  Heartbeat                 ──▶     every 250 ms from then on (see crate::watch)
//!                            ◀──     Heartbeat     every 250 ms once it is admitted; a PE
//!                                            hearing nothing for the stall timeout leaves
//!  Metrics { threads }       ──▶     after each heartbeat once its threads run (crate::metrics)
//!                            ◀──     Plan { plan, resume, .. }   the whole plan, and where
//!                                            the state the job resumes from is (part files)
//!  Bound { endpoints }       ──▶     (every PE has bound its receivers)
//!                            ◀──     Connect { endpoints }   PEs open their senders
//!  Ready                     ──▶     (every PE is built and started)
//!                            ◀──     Go            sources start
//!                            ◀──     Stop          (Ctrl-C, duration): sources finish, drain
//!                            ◀──     Suspend       (a redeploy): sources pause, drain, snapshot
//!                            ◀──     Checkpoint { n }          take checkpoint n
//!  Checkpointed { ack }      ──▶     an instance's part of n written (crate::checkpoints)
//!  Results { sink, .. }      ──▶     tuples a sink returns to the program (crate::results)
//!                            ◀──     CheckpointComplete { n }  every part of n is stored
//!  Done { report } | Failed { error }   a suspended PE's states written to part files
//!                                            (`StateFiles`), the report saying where
//! ```
//! A PE that loses the socket, or hears nothing on it for the stall timeout, aborts (its
//! launcher is gone or stopped); the launcher treats a PE that exits without `Done` as dead,
//! and one it hears nothing from for the stall timeout as silent.

use sluice_transport::Rendezvous;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_graph::{histogram_from_pairs, histogram_pairs, OperatorReport};
use sluice_plan::PhysicalPlan;

use crate::checkpoints::{PartAck, StateFiles};
use crate::metrics::ThreadSample;
use crate::resume::PeResume;
use crate::{InstanceReport, InstanceState, JobReport, RunError};
use sluice_checkpoint::PartEntry;

/// What a PE tells its launcher.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum FromPe {
    Hello {
        pe: usize,
    },
    /// Receivers are bound; what their senders must be told (a network receiver's address, a
    /// shared segment's nonce), by channel.
    Bound {
        endpoints: Vec<(usize, Rendezvous)>,
    },
    Ready,
    /// It is alive (sent every [`HEARTBEAT_PERIOD`] from its `Hello` on).
    Heartbeat,
    /// Its threads' live metrics, after a heartbeat once they run ([`crate::metrics`]).
    Metrics {
        threads: Vec<ThreadSample>,
    },
    /// One of its instances took its part of a checkpoint, or finished.
    Checkpointed {
        ack: PartAck,
    },
    /// Tuples one instance of a sink returns to the launching process: their encodings as
    /// a postcard `Vec<Vec<u8>>`, in base64 ([`crate::results`]).
    Results {
        sink: String,
        instance: usize,
        tuples: String,
    },
    Done {
        report: WireReport,
    },
    /// It failed; `consequence`: because of a failure elsewhere (a neighbour that stopped
    /// receiving), so another PE's failure, if one comes, is the cause.
    Failed {
        error: String,
        consequence: bool,
        /// It would fail again if the job were restarted ([`crate::RunError::is_permanent`]).
        #[serde(default)]
        permanent: bool,
    },
}

/// How often a running PE tells its launcher it is alive: the data plane's sampling period,
/// since its live metrics go with the heartbeat.
pub(crate) const HEARTBEAT_PERIOD: std::time::Duration = crate::metrics::SAMPLE_PERIOD;

/// What the launcher tells a PE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum ToPe {
    /// The job's plan, which the PE builds its part of, and the state the job resumes from.
    Plan {
        plan: Box<PhysicalPlan>,
        resume: Option<Box<PeResume>>,
        /// The job's checkpoint directory, when it takes checkpoints.
        checkpoints: Option<std::path::PathBuf>,
        /// Where the PE writes its instances' states if the job is suspended
        /// ([`crate::checkpoints::StateFiles`]), reporting where they are; `None`: they go in
        /// its report (PEs of other hosts).
        #[serde(default)]
        states: Option<std::path::PathBuf>,
    },
    /// Open the senders; what every bound receiver of the job told its senders, by channel.
    Connect {
        endpoints: Vec<(usize, Rendezvous)>,
    },
    Go,
    Stop,
    Suspend,
    /// Take checkpoint n.
    Checkpoint {
        n: u64,
    },
    /// Checkpoint n is complete.
    CheckpointComplete {
        n: u64,
    },
    /// The launcher is alive (sent every [`HEARTBEAT_PERIOD`] from the PE's admission on).
    Heartbeat,
}

/// A PE's report in a form JSON carries: histograms as (value, count) pairs.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireReport {
    instances: Vec<WireInstance>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireInstance {
    operator: String,
    instance: String,
    index: usize,
    tuples_in: u64,
    tuples_out: u64,
    cpu_ns: u64,
    /// Absent from a report of a PE built before the runtime measured it.
    #[serde(default)]
    sent: Vec<(usize, u64)>,
    counters: BTreeMap<String, u64>,
    latency: Option<Vec<(u64, u64)>>,
    arrival_latency: Option<Vec<(u64, u64)>>,
    sink: bool,
    state: Option<InstanceState>,
    /// Where its state was written instead ([`WireReport::store_states`]).
    #[serde(default)]
    part: Option<PartEntry>,
}

impl WireReport {
    pub(crate) fn from_report(report: &JobReport) -> Self {
        Self {
            instances: report
                .instances
                .iter()
                .map(|i| WireInstance {
                    operator: i.operator.clone(),
                    instance: i.instance.clone(),
                    index: i.index,
                    tuples_in: i.tuples_in,
                    tuples_out: i.tuples_out,
                    cpu_ns: i.cpu_ns,
                    sent: i.sent.clone(),
                    counters: i.report.counters.clone(),
                    latency: i.report.latency.as_ref().map(histogram_pairs),
                    arrival_latency: i.arrival_latency.as_ref().map(histogram_pairs),
                    sink: i.sink,
                    state: i.state.clone(),
                    part: None,
                })
                .collect(),
        }
    }

    /// Writes every instance's state to state files in `dir` (made if there is any), the
    /// report saying where each is instead.
    pub(crate) fn store_states(&mut self, dir: &Path) -> Result<(), RunError> {
        let mut files = None;
        for i in &mut self.instances {
            if let Some(state) = i.state.take() {
                let files = match &files {
                    Some(files) => files,
                    None => files.insert(StateFiles::open(dir)?),
                };
                i.part = Some(files.write(&i.operator, i.index, &state)?);
            }
        }
        Ok(())
    }

    /// The instances' reports, each state read back from the state files in `states` where
    /// it was written there.
    pub(crate) fn into_instances(
        self,
        states: Option<&Path>,
    ) -> Result<Vec<InstanceReport>, RunError> {
        self.instances
            .into_iter()
            .map(|i| {
                let state = match (i.state, &i.part, states) {
                    (Some(state), _, _) => Some(state),
                    (None, Some(part), Some(dir)) => Some(StateFiles::open(dir)?.read(part)?),
                    (None, Some(part), None) => {
                        return Err(RunError::Launch(format!(
                            "a PE wrote the state of '{}' to a file ('{}') where its launcher \
                             keeps none",
                            i.instance, part.file
                        )))
                    }
                    (None, None, _) => None,
                };
                Ok(InstanceReport {
                    operator: i.operator,
                    instance: i.instance,
                    index: i.index,
                    tuples_in: i.tuples_in,
                    tuples_out: i.tuples_out,
                    cpu_ns: i.cpu_ns,
                    sent: i.sent,
                    report: OperatorReport {
                        counters: i.counters,
                        latency: i.latency.as_deref().map(histogram_from_pairs),
                    },
                    arrival_latency: i.arrival_latency.as_deref().map(histogram_from_pairs),
                    sink: i.sink,
                    state,
                })
            })
            .collect()
    }
}

/// Writes one message as a line; refuses one longer than [`MAX_LINE`], which its peer would.
pub(crate) fn send<T: Serialize>(stream: &mut impl Write, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    if line.len() as u64 > MAX_LINE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "a control message of {} bytes is over the {} MiB a control stream carries",
                line.len(),
                MAX_LINE >> 20
            ),
        ));
    }
    stream.write_all(&line)
}

/// The longest line a peer may send; a longer one is a broken peer. State never travels in
/// one between processes of one host: a job restarted from a checkpoint, suspended or resumed
/// from a suspended job's state has each PE read and write its parts as files
/// ([`crate::checkpoints::StateFiles`]). Only a suspended job's state across hosts (PEs that
/// reach their launcher over TCP) travels inside the messages, refused past it by [`send`],
/// naming both sizes.
pub(crate) const MAX_LINE: u64 = 64 << 20;

/// Reads one message; `Ok(None)` at the end of the stream.
pub(crate) fn receive<T: for<'de> Deserialize<'de>>(
    reader: &mut impl BufRead,
) -> std::io::Result<Option<T>> {
    let mut line = String::new();
    let read = Read::by_ref(reader).take(MAX_LINE).read_line(&mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if read as u64 == MAX_LINE && !line.ends_with('\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "a control message is over the {} MiB a control stream carries",
                MAX_LINE >> 20
            ),
        ));
    }
    serde_json::from_str(&line)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_graph::latency_histogram;
    use std::time::Duration;

    #[test]
    fn reports_survive_the_wire() {
        let mut latency = latency_histogram();
        latency.saturating_record_n(1500, 3);
        latency.saturating_record(90_000);
        let report = JobReport::new(
            Duration::from_millis(1200),
            vec![InstanceReport {
                operator: "sink".into(),
                instance: "sink".into(),
                index: 0,
                tuples_in: 7,
                tuples_out: 0,
                cpu_ns: 12_345,
                sent: vec![(2, 5), (4, 2)],
                report: OperatorReport {
                    counters: [("words".to_string(), 4)].into_iter().collect(),
                    latency: Some(latency.clone()),
                },
                arrival_latency: Some(latency.clone()),
                sink: true,
                state: Some(InstanceState {
                    finished: true,
                    ended_ports: vec![0],
                    ..InstanceState::default()
                }),
            }],
        );
        let wire: WireReport = serde_json::from_str(
            &serde_json::to_string(&WireReport::from_report(&report)).unwrap(),
        )
        .unwrap();
        let back = wire.into_instances(None).unwrap();
        assert_eq!(back[0].tuples_in, 7);
        assert_eq!(back[0].cpu_ns, 12_345);
        assert_eq!(back[0].sent, [(2, 5), (4, 2)]);
        assert_eq!(back[0].report.counters["words"], 4);
        let h = back[0].report.latency.as_ref().unwrap();
        assert_eq!(h.len(), 4);
        assert_eq!(h.value_at_quantile(0.5), latency.value_at_quantile(0.5));
        assert_eq!(h.max(), latency.max());
        assert!(back[0].sink);
        assert_eq!(back[0].arrival_latency.as_ref().map(|h| h.len()), Some(4));
        assert_eq!(
            back[0].state.as_ref().map(|s| s.ended_ports.clone()),
            Some(vec![0])
        );
    }

    #[test]
    fn a_report_without_measured_traffic_reads_as_none_sent() {
        let older = r#"{"instances":[{"operator":"a","instance":"a","index":0,"tuples_in":0,
            "tuples_out":3,"cpu_ns":0,"counters":{},"latency":null,"arrival_latency":null,
            "sink":false}]}"#;
        let back = serde_json::from_str::<WireReport>(older)
            .unwrap()
            .into_instances(None)
            .unwrap();
        assert_eq!((back[0].tuples_out, back[0].sent.len()), (3, 0));
    }
}
