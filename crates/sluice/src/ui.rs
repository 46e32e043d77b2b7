//! `sluice ui [ADDRESS:PORT]`: serves the REST API and the web page of every job of this user
//! on this host ([`sluice_web::host`]) until Ctrl-C. Loopback (`127.0.0.1:8081`) unless told
//! another address; any other needs a token (`--token` or `SLUICE_UI_TOKEN`).

use std::io::Write;
use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;
use sluice_web::host::{HostUi, DEFAULT_ADDRESS};

/// The variable that gives the token when `--token` does not.
const TOKEN_VARIABLE: &str = "SLUICE_UI_TOKEN";

/// Arguments of `sluice ui`.
#[derive(Args, Debug)]
pub(crate) struct UiArgs {
    /// Where to serve (port 0: any free port, said on standard output).
    #[arg(value_name = "ADDRESS:PORT", default_value = DEFAULT_ADDRESS)]
    address: SocketAddr,
    /// The token every request must carry (`Authorization: Bearer TOKEN`, or `?token=TOKEN`
    /// on a page's address); required off loopback. Default: $SLUICE_UI_TOKEN.
    #[arg(long)]
    token: Option<String>,
}

/// `sluice ui`: serves until Ctrl-C.
pub(crate) fn ui(args: UiArgs) -> anyhow::Result<()> {
    let token = args.token.or_else(|| std::env::var(TOKEN_VARIABLE).ok());
    let served = HostUi::serve(args.address, token)?;
    let (stopped, stop) = std::sync::mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = stopped.send(());
    })
    .context("cannot handle Ctrl-C")?;
    writeln!(
        std::io::stdout().lock(),
        "ui: http://{}/ (the REST API at /jobs); Ctrl-C ends it",
        served.address()
    )?;
    let _ = stop.recv();
    Ok(())
}
