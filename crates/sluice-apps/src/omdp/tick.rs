//! The tuples OMDP's operators pass on: a decoded message with the time stamps of its trip
//! ([`Tick`]), and a feed handler's running counts for the ingest collector ([`IngestTick`]).

use bytemuck::{Pod, Zeroable};
use sluice_feed::{Message, MessageKind};
use sluice_types::facade_tuple;

/// One options message on its way from a feed handler to a decision engine and, one in
/// `sample-every`, on to the metrics collector. 96 bytes, fixed size (a facade tuple: no
/// serialization on any transport), in the 60-100 bytes of an OPRA message the paper cites.
///
/// The stamps are `sluice_types::monotonic_ns` (CLOCK_MONOTONIC, one clock for every process
/// of the host). A feed handler stamps `fh_in_ns` once per packet, when it takes the packet,
/// so every message of a packet carries its packet's arrival, as in the paper; it stamps
/// `fh_out_ns` only on sampled messages (0 on the others: a sampled message is one whose
/// `fh_out_ns` is set), the decision engine `de_in_ns` and `de_out_ns` on those, and the
/// collector its own arrival.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq)]
pub struct Tick {
    /// The message's sequence number in its channel.
    pub seq: u64,
    /// Best bid of a quote, in 1/10,000 of a dollar.
    pub bid_price: u64,
    /// Best offer of a quote.
    pub ask_price: u64,
    /// Price of a trade.
    pub trade_price: u64,
    /// When the feed sender sent the packet.
    pub sent_ns: u64,
    /// When the feed handler received the packet.
    pub fh_in_ns: u64,
    /// When the feed handler passed the message on (sampled messages only).
    pub fh_out_ns: u64,
    /// When the decision engine took it.
    pub de_in_ns: u64,
    /// When the decision engine passed it on.
    pub de_out_ns: u64,
    /// The option series.
    pub series: u32,
    /// Its underlying symbol.
    pub underlying: u32,
    /// Size of the bid.
    pub bid_size: u32,
    /// Size of the offer.
    pub ask_size: u32,
    /// Size of a trade.
    pub trade_size: u32,
    /// The channel it came on.
    pub channel: u16,
    /// 0 for a quote, 1 for a trade.
    pub kind: u8,
    /// The exchange it came from.
    pub exchange: u8,
}
facade_tuple!(Tick);

/// [`Tick::kind`] of a trade.
pub const TRADE: u8 = 1;

impl Tick {
    /// The tick of `message`, received on `channel` in a packet sent at `sent_ns` and received
    /// at `fh_in_ns`.
    pub fn new(message: &Message, channel: u16, sent_ns: u64, fh_in_ns: u64) -> Self {
        Self {
            seq: message.seq,
            bid_price: message.bid_price,
            ask_price: message.ask_price,
            trade_price: message.trade_price,
            sent_ns,
            fh_in_ns,
            fh_out_ns: 0,
            de_in_ns: 0,
            de_out_ns: 0,
            series: message.series,
            underlying: message.underlying,
            bid_size: message.bid_size,
            ask_size: message.ask_size,
            trade_size: message.trade_size,
            channel,
            kind: match message.kind {
                MessageKind::Quote => 0,
                MessageKind::Trade => TRADE,
            },
            exchange: message.exchange,
        }
    }

    /// Whether the metrics collector gets it.
    pub fn is_sampled(&self) -> bool {
        self.fh_out_ns != 0
    }
}

/// A feed handler's counts so far, sent to the ingest metrics collector every
/// `INGEST_EVERY` packets and when the handler stops. Cumulative, so a later one replaces an
/// earlier one.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable, PartialEq, Eq, Default)]
pub struct IngestTick {
    /// The handler's channel.
    pub channel: u64,
    /// Packets received and decoded.
    pub packets: u64,
    /// Messages decoded.
    pub messages: u64,
    /// Messages missing from the channel's sequence since its first packet.
    pub missed: u64,
    /// Packets refused: truncated, corrupt, or not of this channel.
    pub malformed: u64,
    /// Packets that started before the end of what was seen (late or duplicated).
    pub late: u64,
}
facade_tuple!(IngestTick);

/// Packets between two [`IngestTick`]s of a handler.
pub const INGEST_EVERY: u64 = 1024;
