//! The engine's file and socket connectors (`sluice-connectors`) on Python streams: what a
//! Python `read_csv`, `read_socket` or `write_text` adds to the job. The connectors are the
//! engine's own: their formats read and write [`Value`](crate::value::Value)s through its
//! serde implementation (the module `value` says how), and the file sinks are the engine's
//! exactly-once ones.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use sluice_connectors::csv_file::{CsvFormat, CsvSource};
use sluice_connectors::stream_sink::{ByteTarget, StreamSink};
use sluice_connectors::tcp::TcpSource;
use sluice_connectors::TcpEndpoint;
use sluice_ops::{Dataflow, Stream};

use crate::value::{Carried, CsvRecord};

/// The records of the CSV file at `path` ([`CsvRecord`]s), the first its header when `header`.
pub fn read_csv(flow: &Dataflow, name: &str, path: PathBuf, header: bool) -> Stream<CsvRecord> {
    let format = CsvFormat {
        has_headers: header,
        ..CsvFormat::default()
    };
    flow.source(name, move |_| {
        CsvSource::<CsvRecord>::new(path.clone(), format)
    })
}

/// The lines of TCP connections at `address`: those accepted there (until `connections` have
/// ended, when given) with `listen`, the one made to it otherwise. An address that does not
/// resolve is refused here, naming it.
pub fn read_socket(
    flow: &Dataflow,
    name: &str,
    address: &str,
    listen: bool,
    connections: Option<u64>,
) -> Result<Stream<String>, String> {
    let resolved: SocketAddr = address
        .to_socket_addrs()
        .ok()
        .and_then(|mut all| all.next())
        .ok_or_else(|| format!("read_socket: '{address}' is no address (host:port)"))?;
    let endpoint = if listen {
        TcpEndpoint::listen(resolved)
    } else {
        TcpEndpoint::connect(resolved)
    };
    Ok(flow.source(name, move |_| {
        let source = TcpSource::lines(endpoint.clone());
        match connections {
            Some(n) => source.end_after(n),
            None => source,
        }
    }))
}

/// Ends `stream` in a sink writing each tuple's text ([`Carried::write_text`]) as a line of
/// the file at `path`, exactly once through checkpoints ([`StreamSink`]).
pub fn write_text<T: Carried>(stream: &Stream<T>, name: &str, path: PathBuf) {
    stream.sink(name, move |_| {
        StreamSink::formatted_lines(ByteTarget::File(path.clone()), |tuple: &T, line| {
            tuple.write_text(line)
        })
    });
}
