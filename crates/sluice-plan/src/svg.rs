//! Drawing a plan as SVG without Graphviz: PEs as boxes, their threads as boxes inside them,
//! operator instances as boxes inside the threads, and every physical edge as an arrow labelled
//! with its partitioning and transport: one label per receiving instance and kind of edge into
//! it, naming its channel (`key-by · shm-osr c1`) or counting them (`round-robin · 5 ×
//! threaded`; the channels' names are its tooltip).
//!
//! The layout is layered: an instance's column is its depth in the plan (the longest path to it
//! from a source), so every edge runs left to right. PEs whose columns do not overlap share a
//! band (first fit in plan order: a pipeline of PEs is one row), the bands stacked top to
//! bottom; each thread is a band inside its PE, and instances of one thread at the same depth
//! are stacked in that band. Every box and label is placed from the plan alone, so a plan of
//! hundreds of instances (vwap's 332 under `processes`) gives a large but valid picture.
//!
//! Under each instance's name, after each thread's title and under each edge label is an empty
//! `<text class="live">` (`data-op` names the instance, `data-thread` the thread,
//! `data-channel` the label's channels, separated by spaces) where the web page of `sluice run
//! --ui` writes the live figures.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::{PePlan, PhysicalPlan};

/// Height of an instance's box: its name and a line of live figures.
const NODE_HEIGHT: f64 = 38.0;
/// Space between instances stacked in one thread.
const ROW_GAP: f64 = 10.0;
/// Space between columns, where the edges and their labels run.
const COLUMN_GAP: f64 = 200.0;
/// Estimated width of one character at the drawing's 12 px font.
const CHAR_WIDTH: f64 = 7.0;
/// Narrowest instance box: room for its live figures (`in 123.4k/s · out 123.4k/s`).
const MIN_NODE_WIDTH: f64 = 165.0;
/// Space inside a box around what it holds.
const PAD: f64 = 10.0;
/// Height of a box's title line.
const TITLE: f64 = 20.0;
/// Space around the drawing and between stacked boxes.
const MARGIN: f64 = 20.0;

/// The label of the edges of one kind into one instance.
struct Label {
    x: f64,
    y: f64,
    /// The channels of those edges, in plan order (none for fused edges).
    channels: Vec<String>,
    /// How many edges.
    edges: usize,
}

/// The columns instances are drawn in.
struct Grid<'a> {
    /// Each instance's column.
    depth: &'a [usize],
    /// Each column's left edge and width.
    column_x: &'a [f64],
    column_width: &'a [f64],
}

/// A PE drawn: its boxes, and where it ends to the right and below.
struct DrawnPe {
    svg: String,
    right: f64,
    bottom: f64,
}

/// Where an instance's box is.
#[derive(Clone, Copy, Default)]
struct Place {
    x: f64,
    y: f64,
    width: f64,
}

impl PhysicalPlan {
    /// Each instance's depth: the number of edges on the longest path to it from a source.
    fn depths(&self) -> Vec<usize> {
        let n = self.instances.len();
        let mut inputs = vec![0usize; n];
        let mut outputs: Vec<Vec<usize>> = vec![Vec::new(); n];
        for e in &self.edges {
            inputs[e.to.instance.0] += 1;
            outputs[e.from.instance.0].push(e.to.instance.0);
        }
        let mut depth = vec![0usize; n];
        let mut ready: Vec<usize> = (0..n).filter(|&i| inputs[i] == 0).collect();
        while let Some(i) = ready.pop() {
            for &j in &outputs[i] {
                depth[j] = depth[j].max(depth[i] + 1);
                inputs[j] -= 1;
                if inputs[j] == 0 {
                    ready.push(j);
                }
            }
        }
        depth
    }

    /// Draws `pe` with its top at `top`, placing its instances in `places`.
    fn draw_pe(&self, pe: &PePlan, top: f64, grid: &Grid<'_>, places: &mut [Place]) -> DrawnPe {
        let columns = grid.column_x.len();
        let mut y = top + TITLE;
        let mut pe_span = (f64::MAX, f64::MIN);
        let mut threads = String::new();
        for thread in &pe.threads {
            let thread_top = y;
            y += TITLE;
            let mut rows_at_depth = vec![0usize; columns];
            let mut span = (f64::MAX, f64::MIN);
            for id in &thread.instances {
                let d = grid.depth[id.0];
                let row = rows_at_depth[d];
                rows_at_depth[d] += 1;
                let place = Place {
                    x: grid.column_x[d],
                    y: y + row as f64 * (NODE_HEIGHT + ROW_GAP),
                    width: grid.column_width[d],
                };
                places[id.0] = place;
                span = (span.0.min(place.x), span.1.max(place.x + place.width));
            }
            let rows = rows_at_depth.iter().copied().max().unwrap_or(0).max(1);
            y += rows as f64 * (NODE_HEIGHT + ROW_GAP) - ROW_GAP + PAD;
            if thread.instances.is_empty() {
                span = (grid.column_x[0], grid.column_x[0] + grid.column_width[0]);
            }
            let label = format!(
                "thread {}{}",
                thread.name,
                thread
                    .core
                    .map_or(String::new(), |c| format!(" (core {c})"))
            );
            let (left, right) = (span.0 - PAD, span.1.max(span.0 + text_width(&label)) + PAD);
            let _ = writeln!(
                threads,
                r#"<g class="thread" data-thread="{name}"><rect x="{left}" y="{thread_top}" width="{w}" height="{h}" rx="4"/><text class="title" x="{tx}" y="{ty}">{label}</text><text class="live" data-thread="{name}" x="{lx}" y="{ty}"></text></g>"#,
                name = escape(&thread.name),
                w = right - left,
                h = y - thread_top,
                tx = left + 4.0,
                ty = thread_top + 14.0,
                lx = left + 12.0 + text_width(&label),
                label = escape(&label),
            );
            pe_span = (pe_span.0.min(left), pe_span.1.max(right));
            y += PAD / 2.0;
        }
        let label = format!("PE {} '{}' on {}", pe.id, pe.name, pe.host);
        if pe.threads.is_empty() {
            pe_span = (MARGIN + PAD, MARGIN + PAD);
        }
        let (left, right) = (
            pe_span.0 - PAD,
            pe_span.1.max(pe_span.0 + text_width(&label)) + PAD,
        );
        let bottom = y + PAD / 2.0;
        let mut svg = format!(
            r#"<g class="pe" data-pe="{name}"><rect x="{left}" y="{top}" width="{w}" height="{h}" rx="6"/><text class="title" x="{tx}" y="{ty}">{label}</text></g>"#,
            name = escape(&pe.name),
            w = right - left,
            h = bottom - top,
            tx = left + 6.0,
            ty = top + 15.0,
            label = escape(&label),
        );
        svg.push('\n');
        svg.push_str(&threads);
        DrawnPe { svg, right, bottom }
    }

    /// The plan as a standalone SVG document (see the module documentation for its layout).
    pub fn to_svg(&self) -> String {
        let depth = self.depths();
        let columns = depth.iter().max().map_or(1, |d| d + 1);
        let mut column_width = vec![MIN_NODE_WIDTH; columns];
        for (i, instance) in self.instances.iter().enumerate() {
            let width = text_width(&instance.name) + 2.0 * PAD;
            column_width[depth[i]] = column_width[depth[i]].max(width);
        }
        let mut column_x = Vec::with_capacity(columns);
        let mut x = MARGIN + 2.0 * PAD;
        for width in &column_width {
            column_x.push(x);
            x += width + COLUMN_GAP;
        }
        let title = format!(
            "plan for {} ({}): {} PE(s), {} thread(s), {} instance(s), {} edge(s)",
            self.job,
            self.strategy,
            self.pes.len(),
            self.threads().count(),
            self.instances.len(),
            self.edges.len()
        );
        let mut drawing_width = text_width(&title) + 2.0 * MARGIN;

        let grid = Grid {
            depth: &depth,
            column_x: &column_x,
            column_width: &column_width,
        };
        // PEs whose columns do not overlap share a band (a pipeline of PEs runs left to
        // right), first fit in plan order; the bands run top to bottom.
        let spans: Vec<(usize, usize)> = self
            .pes
            .iter()
            .map(|pe| {
                let depths = || self.pe_instances(pe.id).map(|i| depth[i.id.0]);
                (depths().min().unwrap_or(0), depths().max().unwrap_or(0))
            })
            .collect();
        let mut bands: Vec<Vec<usize>> = Vec::new();
        for (pe, &(low, high)) in spans.iter().enumerate() {
            let free = |band: &&mut Vec<usize>| {
                band.iter()
                    .all(|&other| spans[other].1 < low || high < spans[other].0)
            };
            match bands.iter_mut().find(free) {
                Some(band) => band.push(pe),
                None => bands.push(vec![pe]),
            }
        }
        let mut places = vec![Place::default(); self.instances.len()];
        let mut boxes = String::new();
        let mut y = MARGIN + TITLE + PAD;
        for band in &bands {
            let mut bottom = y;
            for &pe in band {
                let drawn = self.draw_pe(&self.pes[pe], y, &grid, &mut places);
                boxes.push_str(&drawn.svg);
                drawing_width = drawing_width.max(drawn.right + MARGIN);
                bottom = bottom.max(drawn.bottom);
            }
            y = bottom + MARGIN;
        }
        let height = y + MARGIN;

        let mut edges = String::new();
        // One label per receiving instance and kind of edge into it, naming its channels.
        let mut labels: BTreeMap<(usize, String, &str), Label> = BTreeMap::new();
        for e in &self.edges {
            let (from, to) = (places[e.from.instance.0], places[e.to.instance.0]);
            let (x1, y1) = (from.x + from.width, from.y + NODE_HEIGHT / 2.0);
            let (x2, y2) = (to.x, to.y + NODE_HEIGHT / 2.0);
            let bend = ((x2 - x1) / 2.0).max(40.0);
            let kind = match e.channel {
                None => "fused",
                Some(c) if self.crosses_pes(&self.channels[c]) => "between-pes",
                Some(_) => "threaded",
            };
            let channel = e.channel.map_or(String::new(), |c| self.channels[c].name());
            let _ = writeln!(
                edges,
                r#"<path class="edge {kind}" data-channel="{channel}" d="M{x1},{y1} C{c1},{y1} {c2},{y2} {x2},{y2}" marker-end="url(#arrow)"/>"#,
                c1 = x1 + bend,
                c2 = x2 - bend,
            );
            let label = labels
                .entry((e.to.instance.0, e.partitioning.clone(), e.transport.name()))
                .or_insert(Label {
                    x: x2 - 2.0 * PAD,
                    y: y2 - 18.0,
                    channels: Vec::new(),
                    edges: 0,
                });
            label.edges += 1;
            if !channel.is_empty() && !label.channels.contains(&channel) {
                label.channels.push(channel);
            }
        }
        // Labels end just before their receiver's thread, above the edge, the live line under
        // the label; those into one receiver stack upward.
        let mut stacked = vec![0usize; self.instances.len()];
        for ((to, partitioning, transport), label) in &labels {
            let y = label.y - stacked[*to] as f64 * 28.0;
            stacked[*to] += 1;
            let text = match label.channels.as_slice() {
                [] if label.edges == 1 => format!("{partitioning} · {transport}"),
                [] => format!("{partitioning} · {} × {transport}", label.edges),
                [one] => format!("{partitioning} · {transport} {one}"),
                many => format!("{partitioning} · {} × {transport}", many.len()),
            };
            let _ = writeln!(
                edges,
                r#"<g class="edge-label"><title>{channels}</title><text x="{x}" y="{y}">{text}</text><text class="live" data-channel="{channels}" x="{x}" y="{y2}"></text></g>"#,
                x = label.x,
                text = escape(&text),
                channels = label.channels.join(" "),
                y2 = y + 11.0,
            );
        }

        let mut nodes = String::new();
        for (i, instance) in self.instances.iter().enumerate() {
            let p = places[i];
            let _ = writeln!(
                nodes,
                r#"<g class="op" data-op="{name}"><rect x="{x}" y="{y}" width="{w}" height="{NODE_HEIGHT}" rx="3"/><text class="name" x="{tx}" y="{ty}">{name}</text><text class="live" data-op="{name}" x="{tx}" y="{ly}"></text></g>"#,
                name = escape(&instance.name),
                x = p.x,
                y = p.y,
                w = p.width,
                tx = p.x + PAD,
                ty = p.y + 15.0,
                ly = p.y + 31.0,
            );
        }

        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{drawing_width}" height="{height}" viewBox="0 0 {drawing_width} {height}" font-family="sans-serif" font-size="12">"#
        );
        svg.push_str(STYLE);
        let _ = writeln!(
            svg,
            r#"<text class="heading" x="{MARGIN}" y="{y}">{}</text>"#,
            escape(&title),
            y = MARGIN + 8.0
        );
        svg.push_str(&boxes);
        svg.push_str(&edges);
        svg.push_str(&nodes);
        svg.push_str("</svg>\n");
        svg
    }
}

/// The drawing's style and the arrowhead, inside the document so it needs nothing else.
const STYLE: &str = r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>
<style>
.pe rect { fill: #eef3fb; stroke: #4a6fa5; stroke-width: 1.5; }
.thread rect { fill: #ffffff; stroke: #9bb0cc; stroke-dasharray: 4 2; }
.title { fill: #2b4a75; font-weight: bold; }
.heading { font-size: 14px; font-weight: bold; }
.op rect { fill: #fff8e6; stroke: #b8860b; }
.op.busy rect { fill: #ffd9d0; stroke: #c0392b; }
.edge { fill: none; stroke: #555; }
.edge.fused { stroke: #aaa; }
.edge.between-pes { stroke-dasharray: 6 3; stroke-width: 1.5; }
.edge.blocked { stroke: #c0392b; stroke-width: 2.5; }
.edge-label text { fill: #333; font-size: 11px; text-anchor: end; }
.live { fill: #1a7f37; font-size: 11px; }
</style>
"##;

/// The width `text` takes at the drawing's font, estimated.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR_WIDTH
}

/// `text` with XML's special characters escaped, for an attribute or text node.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_what_xml_reserves() {
        assert_eq!(
            escape(r#"a<b & "c" 'd'>"#),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"
        );
    }
}
