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
//!                            ◀──     StateFrame { len } ...      a suspended job's state, to
//!                                            a PE of another host (StateFrames)
//!                            ◀──     Plan { plan, resume, .. }   the whole plan, and where
//!                                            the state the job resumes from is (part files,
//!                                            or the frames before it)
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
//!  StateFrame { len } ...    ──▶     a suspended PE's states, from a PE of another host
//!  Done { report } | Failed { error }   a suspended PE's states written to part files
//!                                            (`StateFiles`), the report saying where, or
//!                                            sent in the frames before it
//! ```
//! A suspended job's state goes between hosts (where the launcher and its PE share no
//! directory) as its postcard encoding cut in frames of at most [`MAX_FRAME`] bytes, put
//! back together by [`StateFrames`]: its size has no limit of the messages'. A frame is a
//! message whose line gives the number of bytes that follow it raw ([`send_message`],
//! [`receive_message`]). A batch of results is one frame too: its tuples' bytes are not
//! written as JSON nor read back from it.
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
    /// a postcard `Vec<Vec<u8>>`, raw after the line ([`crate::results`]).
    Results {
        sink: String,
        instance: usize,
        tuples: Frame,
    },
    /// A frame of its instances' states, which its `Done` report names ([`StateFrames`]).
    StateFrame(Frame),
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
    /// A frame of the state the job resumes from, which the plan after it names
    /// ([`StateFrames`]).
    StateFrame(Frame),
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
    /// Its state, until it is written to a file or framed: it never travels in the report.
    #[serde(skip)]
    state: Option<InstanceState>,
    /// Where its state was written ([`WireReport::store_states`]).
    #[serde(default)]
    part: Option<PartEntry>,
    /// Its state is in the frames sent before the report ([`WireReport::frame_states`]).
    #[serde(default)]
    framed: bool,
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
                    framed: false,
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

    /// The frames of every instance's state, in the order of the instances, the report
    /// saying which are in them (for a launcher on another host).
    pub(crate) fn frame_states(&mut self) -> Result<Vec<FromPe>, RunError> {
        let mut states = Vec::new();
        for i in &mut self.instances {
            if let Some(state) = i.state.take() {
                states.push(state);
                i.framed = true;
            }
        }
        if states.is_empty() {
            return Ok(Vec::new());
        }
        let frames = state_frames(&states)?;
        Ok(frames
            .into_iter()
            .map(|bytes| FromPe::StateFrame(Frame::new(bytes)))
            .collect())
    }

    /// The instances' reports, each state read back from the state files in `states` where
    /// it was written there, or from the frames `framed` took in where it was framed.
    pub(crate) fn into_instances(
        self,
        states: Option<&Path>,
        framed: &mut StateFrames,
    ) -> Result<Vec<InstanceReport>, RunError> {
        let named = self.instances.iter().filter(|i| i.framed).count();
        let mut sent = match named {
            0 => Vec::new(),
            _ => framed.finish::<Vec<InstanceState>>("the states a PE sent")?,
        }
        .into_iter();
        if sent.len() != named {
            return Err(RunError::Launch(format!(
                "a PE sent {} states in frames for the {named} its report names",
                sent.len()
            )));
        }
        self.instances
            .into_iter()
            .map(|i| {
                let state = match (i.state, i.framed, &i.part, states) {
                    (Some(state), _, _, _) => Some(state),
                    (None, true, _, _) => sent.next(),
                    (None, false, Some(part), Some(dir)) => {
                        Some(StateFiles::open(dir)?.read(part)?)
                    }
                    (None, false, Some(part), None) => {
                        return Err(RunError::Launch(format!(
                            "a PE wrote the state of '{}' to a file ('{}') where its launcher \
                             keeps none",
                            i.instance, part.file
                        )))
                    }
                    (None, false, None, _) => None,
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

/// Bytes one frame carries at most: a part of a state's encoding ([`StateFrames`]) or a
/// batch of a sink's results ([`FromPe::Results`]); 16 MiB and 1 KiB, so that a batch of one
/// tuple of the largest size a sink returns ([`sluice_graph::MAX_RESULT_TUPLE_BYTES`]) fits
/// with its lengths.
pub(crate) const MAX_FRAME: usize = sluice_graph::MAX_RESULT_TUPLE_BYTES + 1024;

/// One frame: its line says how many bytes follow it raw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Frame {
    len: usize,
    /// The bytes, which follow the line.
    #[serde(skip)]
    bytes: Vec<u8>,
}

impl Frame {
    /// The frame of `bytes`.
    pub(crate) fn new(bytes: Vec<u8>) -> Self {
        Frame {
            len: bytes.len(),
            bytes,
        }
    }

    /// Its bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// A message of the control stream: a line, and the raw bytes of a frame after it.
pub(crate) trait Message: Serialize + for<'de> Deserialize<'de> {
    /// Its frame, if it is one.
    fn frame(&self) -> Option<&Frame>;
    /// Its frame, to be filled with the bytes after its line, if it is one.
    fn frame_mut(&mut self) -> Option<&mut Frame>;
}

impl Message for FromPe {
    fn frame(&self) -> Option<&Frame> {
        match self {
            FromPe::StateFrame(frame) | FromPe::Results { tuples: frame, .. } => Some(frame),
            _ => None,
        }
    }
    fn frame_mut(&mut self) -> Option<&mut Frame> {
        match self {
            FromPe::StateFrame(frame) | FromPe::Results { tuples: frame, .. } => Some(frame),
            _ => None,
        }
    }
}

impl Message for ToPe {
    fn frame(&self) -> Option<&Frame> {
        match self {
            ToPe::StateFrame(frame) => Some(frame),
            _ => None,
        }
    }
    fn frame_mut(&mut self) -> Option<&mut Frame> {
        match self {
            ToPe::StateFrame(frame) => Some(frame),
            _ => None,
        }
    }
}

/// The postcard encoding of `state` in frames of at most [`MAX_FRAME`] bytes.
pub(crate) fn state_frames<T: Serialize>(state: &T) -> Result<Vec<Vec<u8>>, RunError> {
    let bytes = postcard::to_allocvec(state)
        .map_err(|e| RunError::Launch(format!("cannot encode a state to send: {e}")))?;
    Ok(bytes.chunks(MAX_FRAME).map(<[u8]>::to_vec).collect())
}

/// The frames of one state a peer sends ([`state_frames`]), put back together.
#[derive(Debug, Default)]
pub(crate) struct StateFrames {
    bytes: Vec<u8>,
}

impl StateFrames {
    /// Adds the frame `frame`.
    pub(crate) fn take(&mut self, frame: Frame) {
        if self.bytes.is_empty() {
            self.bytes = frame.bytes;
        } else {
            self.bytes.extend_from_slice(&frame.bytes);
        }
    }

    /// The state the frames taken so far hold (`what` names it in an error); it starts
    /// afresh.
    pub(crate) fn finish<T: for<'de> Deserialize<'de>>(
        &mut self,
        what: &str,
    ) -> Result<T, RunError> {
        let bytes = std::mem::take(&mut self.bytes);
        postcard::from_bytes(&bytes).map_err(|e| {
            RunError::Launch(format!(
                "{what} ({} bytes in frames) does not decode: {e}",
                bytes.len()
            ))
        })
    }
}

/// Writes `message` ([`send`]), and the bytes of its frame after it if it is one.
pub(crate) fn send_message<T: Message>(
    stream: &mut impl Write,
    message: &T,
) -> std::io::Result<()> {
    send(stream, message)?;
    match message.frame() {
        Some(frame) => stream.write_all(&frame.bytes),
        None => Ok(()),
    }
}

/// Reads one message ([`receive`]), and the bytes of its frame after it if it is one: a
/// frame of more than [`MAX_FRAME`] bytes is refused before any is read, naming the limit.
pub(crate) fn receive_message<T: Message>(reader: &mut impl BufRead) -> std::io::Result<Option<T>> {
    let mut message = receive::<T>(reader)?;
    if let Some(frame) = message.as_mut().and_then(T::frame_mut) {
        if frame.len > MAX_FRAME {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "a frame of {} bytes is over the limit of {MAX_FRAME} (MAX_FRAME)",
                    frame.len
                ),
            ));
        }
        frame.bytes = vec![0; frame.len];
        reader.read_exact(&mut frame.bytes)?;
    }
    Ok(message)
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
/// one message: a job restarted from a checkpoint, suspended or resumed from a suspended
/// job's state has each PE read and write its parts as files on one host
/// ([`crate::checkpoints::StateFiles`]), and send them as frames of [`MAX_FRAME`] bytes
/// between hosts ([`StateFrames`]). A longer message is refused by [`send`], naming both
/// sizes.
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
        let mut sent = WireReport::from_report(&report);
        let mut framed = StateFrames::default();
        for message in sent.frame_states().unwrap() {
            let mut stream = Vec::new();
            send_message(&mut stream, &message).unwrap();
            let received = receive_message::<FromPe>(&mut stream.as_slice()).unwrap();
            let Some(FromPe::StateFrame(frame)) = received else {
                panic!("{received:?} is no frame");
            };
            framed.take(frame);
        }
        let json = serde_json::to_string(&sent).unwrap();
        assert!(
            !json.contains("ended_ports"),
            "a state travels in frames: {json}"
        );
        let wire: WireReport = serde_json::from_str(&json).unwrap();
        let back = wire.into_instances(None, &mut framed).unwrap();
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
            .into_instances(None, &mut StateFrames::default())
            .unwrap();
        assert_eq!((back[0].tuples_out, back[0].sent.len()), (3, 0));
    }

    /// A state longer than a frame goes in several, each a line and its bytes, and comes
    /// back whole.
    #[test]
    fn a_state_goes_in_frames_of_at_most_max_frame_bytes() {
        let state: Vec<u8> = (0..MAX_FRAME * 2 + 5).map(|i| (i % 253) as u8).collect();
        let frames = state_frames(&state).unwrap();
        assert_eq!(frames.len(), 3);
        let mut stream = Vec::new();
        for bytes in frames {
            send_message(&mut stream, &ToPe::StateFrame(Frame::new(bytes))).unwrap();
        }
        send_message(&mut stream, &ToPe::Go).unwrap();
        let mut reader = stream.as_slice();
        let mut framed = StateFrames::default();
        while let Some(ToPe::StateFrame(frame)) = receive_message(&mut reader).unwrap() {
            assert!(frame.bytes.len() <= MAX_FRAME);
            framed.take(frame);
        }
        assert!(reader.is_empty());
        assert_eq!(framed.finish::<Vec<u8>>("state").unwrap(), state);
    }

    /// A batch of results goes as a frame: its line names the sink and the length, and its
    /// bytes follow raw (not in base64 inside the JSON, a third larger and decoded by the
    /// launcher byte by byte).
    #[test]
    fn results_go_raw_after_their_line() {
        let packed: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
        let message = FromPe::Results {
            sink: "counts".into(),
            instance: 1,
            tuples: Frame::new(packed.clone()),
        };
        let mut stream = Vec::new();
        send_message(&mut stream, &message).unwrap();
        let line_end = stream.iter().position(|&b| b == b'\n').unwrap();
        assert!(
            line_end < 100,
            "{}",
            String::from_utf8_lossy(&stream[..line_end])
        );
        assert_eq!(&stream[line_end + 1..], packed.as_slice());
        let Some(FromPe::Results {
            sink,
            instance,
            tuples,
        }) = receive_message::<FromPe>(&mut stream.as_slice()).unwrap()
        else {
            panic!("not the results");
        };
        assert_eq!((sink.as_str(), instance), ("counts", 1));
        assert_eq!(tuples.bytes(), packed.as_slice());
        // A batch of one tuple of the largest size a sink returns fits in one frame.
        let largest = vec![vec![7u8; sluice_graph::MAX_RESULT_TUPLE_BYTES]];
        assert!(postcard::to_allocvec(&largest).unwrap().len() <= MAX_FRAME);
    }

    /// A peer's frame over the limit is refused before its bytes are read, naming the limit;
    /// a frame cut short is an error, and frames that do not add up to a state are refused
    /// when it is decoded.
    #[test]
    fn a_peer_frame_out_of_bounds_is_refused() {
        let over = format!("{{\"StateFrame\":{{\"len\":{}}}}}\n", MAX_FRAME + 1);
        let error = receive_message::<ToPe>(&mut over.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(error.contains("MAX_FRAME"), "{error}");
        assert!(error.contains(&(MAX_FRAME + 1).to_string()), "{error}");
        let short = "{\"StateFrame\":{\"len\":10}}\nabc";
        assert!(receive_message::<FromPe>(&mut short.as_bytes()).is_err());
        let frames = state_frames(&vec![7u64; 1000]).unwrap();
        let mut framed = StateFrames::default();
        framed.take(Frame::new(frames[0][..frames[0].len() / 2].to_vec()));
        let error = framed
            .finish::<Vec<u64>>("the state")
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not decode"), "{error}");
    }
}
