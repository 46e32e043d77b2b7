//! A session's statements run in their order: each query (run or explained) sees the
//! `create function` and `set` statements before it and none after it; a user function's
//! results are what its declared type says.

use sluice_query::parse::MAX_OPERATORS;
use sluice_query::{QueryError, QueryOptions, Session};

/// What `text` prints, a result per line, in a new session.
fn results(text: &str) -> Result<Vec<String>, QueryError> {
    let mut printed = Vec::new();
    Session::new().run("-e", text, &QueryOptions::default(), &mut |value| {
        printed.push(value.to_string())
    })?;
    Ok(printed)
}

#[test]
fn explain_gives_each_query_the_settings_before_it() {
    let query = "select extract(b) from sp a, sp b \
                 where b=sp(count(extract(a))) and a=sp(gen_array(1000,10));";
    let text = format!(
        "set transport = 'shm-vega'; set buffer = 1000; {query} \
         set buffer = 65536; {query}"
    );
    let plan = Session::new()
        .explain("-e", &text, &QueryOptions::default())
        .unwrap();
    let edges: Vec<&str> = plan.lines().filter(|l| l.contains("sp0 -> sp1")).collect();
    assert_eq!(edges.len(), 2, "{plan}");
    assert!(edges[0].contains("slot_bytes=1000,"), "{plan}");
    assert!(edges[1].contains("slot_bytes=65536,"), "{plan}");
}

#[test]
fn a_function_gives_what_its_declaration_says() {
    let evens = "create function evens(integer n) -> stream as \
                 select i*2 from integer i where i in iota(1,n); evens(3);";
    assert_eq!(results(evens).unwrap(), ["2", "4", "6"]);
    let square = "create function sq(integer x) -> integer as select x*x; sq(4);";
    assert_eq!(results(square).unwrap(), ["16"]);
    let odds = "create function odds(integer n) -> bag of integer as \
                select i*2-1 from integer i where i in iota(1,n); odds(1);";
    assert_eq!(results(odds).unwrap(), ["{1}"]);
    let several = "create function first(integer n) -> integer as \
                   select i from integer i where i in iota(1,n); first(2);";
    let error = results(several).unwrap_err().to_string();
    assert!(
        error.contains("first is declared to return one integer, but its select gives 2 results"),
        "{error}"
    );
}

#[test]
fn a_flat_chain_of_operators_is_not_nesting() {
    // 257 operators: refused as more than 256 levels before.
    let sum = format!("1{};", "+1".repeat(257));
    assert_eq!(results(&sum).unwrap(), ["258"]);
    // As long as the limit allows, in a test's thread (2 MiB of stack).
    let longest = MAX_OPERATORS;
    let sum = format!("select 0{} > 0;", "+1".repeat(longest - 1));
    assert_eq!(results(&sum).unwrap(), ["1"]);
}

#[test]
fn an_interrupt_stops_a_query_evaluated_here_and_the_statements_after_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    let count = Arc::new(AtomicUsize::new(0));
    let (done, finished) = mpsc::channel();
    let interrupts = count.clone();
    std::thread::spawn(move || {
        let options = QueryOptions {
            interrupts: Some(interrupts),
            ..QueryOptions::default()
        };
        let mut printed = Vec::new();
        let result = Session::new().run(
            "-e",
            "count(iota(1, 1000000000000000000)); 7;",
            &options,
            &mut |value| printed.push(value.to_string()),
        );
        let _ = done.send((result, printed));
    });
    std::thread::sleep(Duration::from_millis(100));
    count.fetch_add(1, Ordering::Relaxed);
    // A watchdog: without the interrupt the count would run for years.
    let (result, printed) = finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the interrupt stops the query");
    assert!(matches!(result, Err(QueryError::Interrupted)), "{result:?}");
    // The count over what came before the stop, and not the 7 after it.
    assert_eq!(printed.len(), 1, "{printed:?}");
    assert_ne!(printed[0], "7");
}
