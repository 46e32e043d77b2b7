//! The compression and encryption pipelines' yardstick, `serial`: what a user writes without
//! an engine, one thread doing every packet of the input in order, generating it, compressing
//! or encrypting it, decompressing or decrypting it and comparing the result with the packet it
//! generated (which it still holds: unlike the application's sink, it need not make the packet
//! again). It uses the application's own generator and codec ([`sluice_apps::pipeline`]), so
//! the two do the same work on the same bytes. `sluice bench pipeline` runs it over the whole
//! input for the speedup; `sluice bench app` steps it a packet at a time, round the input.

use sluice_apps::pipeline::codec::{Decoder, Encoder};
use sluice_apps::pipeline::data::{Layout, TextGenerator};
use sluice_apps::pipeline::{Pipeline, COMPRESS, ENCRYPT};
use sluice_apps::Settings;

use crate::apps::entry::{Benchable, Yardstick, YardstickSpec};

/// What the serial program is, in a line.
const SERIAL: &str = "one thread: every packet in order generated, compressed or encrypted, decompressed or decrypted, and compared with the packet generated";

/// The registry entry of `compress`.
pub(crate) const BENCHABLE_COMPRESS: Benchable = Benchable {
    name: COMPRESS.name,
    input: "packets",
    counted: "verify",
    unit: "packets",
    input_rate: None,
    yardsticks: &[YardstickSpec {
        name: "serial",
        about: SERIAL,
        tunes: None,
        make: |settings| Serial::from_settings(COMPRESS.name, settings),
    }],
};

/// The registry entry of `encrypt`.
pub(crate) const BENCHABLE_ENCRYPT: Benchable = Benchable {
    name: ENCRYPT.name,
    input: "packets",
    counted: "verify",
    unit: "packets",
    input_rate: None,
    yardsticks: &[YardstickSpec {
        name: "serial",
        about: SERIAL,
        tunes: None,
        make: |settings| Serial::from_settings(ENCRYPT.name, settings),
    }],
};

/// The serial program over one input.
pub(crate) struct Serial {
    layout: Layout,
    generator: TextGenerator,
    encoder: Encoder,
    decoder: Decoder,
    plain: Vec<u8>,
    wire: Vec<u8>,
    back: Vec<u8>,
    /// The index of the next packet, round the input.
    next: u64,
}

impl Serial {
    /// The program for `pipeline`'s input.
    pub(crate) fn new(pipeline: &Pipeline) -> Self {
        let layout = pipeline.layout;
        Self {
            layout,
            generator: TextGenerator::new(layout.seed),
            encoder: Encoder::new(pipeline.stage, layout.seed),
            decoder: Decoder::new(pipeline.stage, layout.seed),
            plain: Vec::new(),
            wire: Vec::new(),
            back: Vec::new(),
            next: 0,
        }
    }

    fn from_settings(app: &str, settings: &Settings) -> anyhow::Result<Box<dyn Yardstick>> {
        Ok(Box::new(Self::new(&Pipeline::from_settings(
            app, settings,
        )?)))
    }

    /// Does the packet at `index`; the error names it and says what failed.
    fn packet(&mut self, index: u64) -> Result<(), String> {
        let id = self.layout.id_of(index);
        let len = self.layout.len_of(index);
        self.generator.fill(index, len, &mut self.plain);
        let named = |e: String| format!("flow {} packet {}: {e}", id.flow, id.seq);
        self.encoder
            .encode(id.flow, id.seq, &self.plain, &mut self.wire)
            .map_err(named)?;
        self.decoder
            .decode(id.flow, id.seq, &self.wire, len, &mut self.back)
            .map_err(named)?;
        if self.back != self.plain {
            return Err(named(
                "the packet decoded differs from the one generated".into(),
            ));
        }
        Ok(())
    }

    /// Does every packet of the input in order; returns the bytes verified.
    pub(crate) fn whole_input(&mut self) -> anyhow::Result<u64> {
        for index in 0..self.layout.packets() {
            self.packet(index).map_err(anyhow::Error::msg)?;
        }
        Ok(self.layout.size)
    }
}

impl Yardstick for Serial {
    /// Packets verified (a packet that fails, which would be a bug, counts for none).
    fn steps(&mut self, n: usize) -> u64 {
        let packets = self.layout.packets();
        let mut verified = 0;
        for _ in 0..n {
            verified += u64::from(self.packet(self.next % packets).is_ok());
            self.next += 1;
        }
        verified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serial_program_verifies_every_packet_round_the_input() {
        for bench in [BENCHABLE_COMPRESS, BENCHABLE_ENCRYPT] {
            let settings = Settings::parse(["size=20000", "packet=3000", "flows=3"]).unwrap();
            let pipeline = Pipeline::from_settings(bench.name, &settings).unwrap();
            assert_eq!(Serial::new(&pipeline).whole_input().unwrap(), 20_000);
            let mut stepped = (bench.yardsticks[0].make)(&settings).unwrap();
            assert_eq!(
                stepped.steps(17),
                17,
                "{}: 7 packets, round twice",
                bench.name
            );
            let bad = Settings::parse(["packet=1"]).unwrap();
            assert!((bench.yardsticks[0].make)(&bad).is_err());
        }
    }
}
