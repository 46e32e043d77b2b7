//! The bench crate's layers depend in one direction only: every path a module writes into the
//! crate (`crate::...`, `super::...`, `self::...`, in `use` declarations, code, macro bodies
//! and doc links) must lead to its own layer or a lower one, never to a higher one and never
//! to an item of the crate root (which only dispatches and re-exports). Within a layer too, no
//! modules (files) may use each other in a circle, a module's use of its parent or children
//! aside. The sources are parsed with `syn`, so a use inside an inline
//! `mod tests { use super::*; }` resolves from that module, not from its file.

use std::path::Path;

use syn::visit::Visit;

/// The layers, lowest first; a module may use its own layer and the layers below it. A module
/// belongs to the layer of the longest entry that is a prefix of its path (`a::b`).
const LAYERS: &[&[&str]] = &[
    &["foundation"],
    &["transports"],
    &["apps"],
    &["suite"],
    &["cli"],
];

/// The rank of the crate root: above every layer.
const ROOT: usize = usize::MAX;

/// The layer of the module at `path`: `Some(ROOT)` for the root, `None` if no layer holds it.
fn rank(path: &[String]) -> Option<usize> {
    if path.is_empty() {
        return Some(ROOT);
    }
    let mut best: Option<(usize, usize)> = None;
    for (rank, layer) in LAYERS.iter().enumerate() {
        for entry in layer.iter() {
            let entry: Vec<&str> = entry.split("::").collect();
            let prefix = entry.len() <= path.len() && entry.iter().zip(path).all(|(a, b)| a == b);
            if prefix && best.is_none_or(|(_, len)| entry.len() > len) {
                best = Some((rank, entry.len()));
            }
        }
    }
    best.map(|(rank, _)| rank)
}

/// The module a path written as `segments` in module `from` leads to, when it leads into the
/// crate; `None` for a path into another crate or to a local name.
fn resolve(from: &[String], segments: &[String]) -> Option<Vec<String>> {
    match segments.first()?.as_str() {
        "crate" => Some(segments[1..].to_vec()),
        "self" => Some([from, &segments[1..]].concat()),
        "super" => {
            let up = segments.iter().take_while(|s| *s == "super").count();
            let base = &from[..from.len().checked_sub(up)?];
            Some([base, &segments[up..]].concat())
        }
        _ => None,
    }
}

/// Every `crate::`, `super::` or `self::` path in free text (a macro body, a doc comment).
fn paths_in_text(text: &str) -> Vec<Vec<String>> {
    let text = text.replace(" :: ", "::");
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (at, _) in text.match_indices("::") {
        let start = text[..at].rfind(|c: char| !ident(c)).map_or(0, |i| i + 1);
        let first = &text[start..at];
        let before = text[..start].chars().next_back();
        if !matches!(first, "crate" | "super" | "self") || before == Some(':') {
            continue;
        }
        let path: Vec<String> = text[start..]
            .split("::")
            .map_while(|s| {
                let s: String = s.chars().take_while(|c| ident(*c)).collect();
                (!s.is_empty()).then_some(s)
            })
            .collect();
        found.push(path);
    }
    found
}

/// The paths a `use` tree names, each as its segments.
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([&prefix[..], &[n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([&prefix[..], &[r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

/// A path into the crate: the module it is written in, and the path it leads to.
type Use = (Vec<String>, Vec<String>);

/// Collects the paths into the crate that one file writes, with the module each is written in.
struct Uses {
    module: Vec<String>,
    found: Vec<Use>,
}

impl Uses {
    fn add(&mut self, segments: &[String]) {
        if let Some(target) = resolve(&self.module, segments) {
            self.found.push((self.module.clone(), target));
        }
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.module.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.module.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        use_paths(&item.tree, &mut Vec::new(), &mut paths);
        paths.iter().for_each(|p| self.add(p));
        syn::visit::visit_item_use(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segments);
        syn::visit::visit_path(self, path);
    }

    /// `pub(crate)`, `pub(super)`: a visibility, not a use.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        for path in paths_in_text(&mac.tokens.to_string()) {
            self.add(&path);
        }
        syn::visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        if let syn::Meta::NameValue(doc) = &attr.meta {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) = &doc.value
            {
                for path in paths_in_text(&text.value()) {
                    self.add(&path);
                }
            }
        }
        syn::visit::visit_attribute(self, attr);
    }
}

/// What breaks the layering among `files` (each a module path such as `suite::report` and
/// its source): one line per module outside every layer and per path leading upward.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut found: Vec<String> = files
        .iter()
        .filter(|(module, _)| rank(&split(module)).is_none())
        .map(|(module, _)| format!("{module}: in no layer (add it to LAYERS)"))
        .collect();
    let (uses, unparsed) = all_uses(files);
    found.extend(unparsed);
    for (from, target) in uses {
        // A module in no layer is reported above.
        let Some(own) = rank(&from) else {
            continue;
        };
        // A path to the root's own items (its re-exports, its functions) has no layer.
        let upward = match rank(&target) {
            Some(to) => to > own,
            None => own != ROOT,
        };
        if upward {
            found.push(format!(
                "{} uses crate::{}, a higher layer",
                from.join("::"),
                target.join("::")
            ));
        }
    }
    found
}

/// Every path into the crate that `files` write, and the modules that do not parse.
fn all_uses(files: &[(String, String)]) -> (Vec<Use>, Vec<String>) {
    let mut found = Vec::new();
    let mut unparsed = Vec::new();
    for (module, source) in files {
        match syn::parse_file(source) {
            Ok(file) => {
                let mut uses = Uses {
                    module: split(module),
                    found: Vec::new(),
                };
                uses.visit_file(&file);
                found.extend(uses.found);
            }
            Err(e) => unparsed.push(format!("{module}: does not parse: {e}")),
        }
    }
    (found, unparsed)
}

/// `a::b` as its segments; the root (`""`) has none.
fn split(module: &str) -> Vec<String> {
    module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A cycle among the modules of `files` (each file a module; a module's use of its ancestors
/// or descendants does not count), as the modules around it, or `None`.
fn cycle(files: &[(String, String)]) -> Option<Vec<String>> {
    let modules: Vec<Vec<String>> = files.iter().map(|(m, _)| split(m)).collect();
    // The file module that holds `path`: the longest one that prefixes it.
    let holder = |path: &[String]| {
        (0..modules.len())
            .filter(|&i| path.starts_with(&modules[i]))
            .max_by_key(|&i| modules[i].len())
    };
    let mut edges = vec![std::collections::BTreeSet::new(); modules.len()];
    for (from, to) in all_uses(files).0 {
        let (Some(a), Some(b)) = (holder(&from), holder(&to)) else {
            continue;
        };
        let related = modules[a].starts_with(&modules[b]) || modules[b].starts_with(&modules[a]);
        if !related {
            edges[a].insert(b);
        }
    }
    // Depth first; a module met again while still on the path closes a cycle.
    fn visit(
        at: usize,
        edges: &[std::collections::BTreeSet<usize>],
        state: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        state[at] = 1;
        path.push(at);
        for &next in &edges[at] {
            if state[next] == 1 {
                let start = path.iter().position(|&m| m == next).unwrap_or(0);
                return Some([&path[start..], &[next]].concat());
            }
            if state[next] == 0 {
                if let Some(found) = visit(next, edges, state, path) {
                    return Some(found);
                }
            }
        }
        path.pop();
        state[at] = 2;
        None
    }
    let mut state = vec![0u8; modules.len()];
    (0..modules.len()).find_map(|start| {
        if state[start] != 0 {
            return None;
        }
        let found = visit(start, &edges, &mut state, &mut Vec::new())?;
        Some(found.iter().map(|&m| files[m].0.clone()).collect())
    })
}

/// Every source file under `dir`, as (module path, text).
fn sources(dir: &Path, module: &str, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("read the source directory") {
        let path = entry.expect("read a directory entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let child = match (module, name.as_str()) {
            (m, "lib" | "mod") => m.to_string(),
            ("", n) => n.to_string(),
            (m, n) => format!("{m}::{n}"),
        };
        if path.is_dir() {
            sources(&path, &child, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read a source file");
            out.push((child, text));
        }
    }
}

/// The crate's own source files.
fn crate_sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    sources(&src, "", &mut files);
    assert!(files.len() > 20, "found only {} source files", files.len());
    files
}

#[test]
fn no_module_uses_a_higher_layer() {
    let found = violations(&crate_sources());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_modules_use_each_other_in_a_circle() {
    assert_eq!(cycle(&crate_sources()), None);
}

#[test]
fn a_circle_is_found_but_not_a_parent_and_its_child() {
    let file = |module: &str, source: &str| (module.to_string(), source.to_string());
    let circle = [
        file("suite", "mod a; mod b; pub use a::X;"),
        file("suite::a", "use super::b::Y; pub struct X;"),
        file("suite::b", "pub struct Y; fn f() { crate::suite::a::X; }"),
        file("suite::c", "use super::X;"),
    ];
    assert_eq!(
        cycle(&circle),
        Some(
            ["suite::a", "suite::b", "suite::a"]
                .map(String::from)
                .to_vec()
        )
    );
    let tree = [
        file("suite", "mod a; mod b; use a::X;"),
        file("suite::a", "use super::b::Y; pub struct X;"),
        file("suite::b", "use super::Z; pub struct Y;"),
    ];
    assert_eq!(cycle(&tree), None);
}

#[test]
fn the_check_finds_every_kind_of_upward_path() {
    let file = |module: &str, source: &str| (module.to_string(), source.to_string());
    let upward = [
        file("foundation::stats", "use crate::suite::report::Row;"),
        file(
            "foundation::stats",
            "use crate::{foundation::load, transports::measure};",
        ),
        file(
            "foundation",
            "fn f() { crate::transports::measure::measure(); }",
        ),
        file("transports::udp", "use super::super::suite::Job;"),
        file(
            "transports::udp",
            "fn f() -> super::super::cli::BenchArgs { todo!() }",
        ),
        file(
            "foundation::args",
            "/// See [`X`](crate::cli::X).\nstruct A;",
        ),
        file(
            "foundation::args",
            "fn f() { println!(\"{}\", crate::apps::NAME); }",
        ),
        file("transports::engine", "use crate::run;"),
        file("suite", "mod inner { use super::super::cli::Args; }"),
    ];
    for (module, source) in &upward {
        let found = violations(&[(module.clone(), source.clone())]);
        assert_eq!(found.len(), 1, "{source}: {found:?}");
    }
    let within = [
        file("foundation", "mod tests { use super::*; }"),
        file(
            "foundation::load",
            "pub(crate) fn f() {} pub(super) struct A;",
        ),
        file(
            "suite::report",
            "use crate::{foundation::stats, transports::measure};",
        ),
        file("suite::peers::zeromq", "use super::super::output;"),
        file(
            "transports::udp",
            "use self::inner::X; use std::io; use super::network;",
        ),
        file("", "use crate::cli::BenchArgs; use crate::suite::main;"),
    ];
    for (module, source) in &within {
        let found = violations(&[(module.clone(), source.clone())]);
        assert!(found.is_empty(), "{source}: {found:?}");
    }
    let stray = violations(&[file("extras", "")]);
    assert_eq!(stray, ["extras: in no layer (add it to LAYERS)"]);
}
