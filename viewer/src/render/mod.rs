//! Renderers of a run: text for terminals, JSON, and a self-contained HTML
//! page, each a [`sink::RunSink`]; and what every string on its way to a
//! terminal goes through.

pub mod html;
pub mod json;
pub mod sink;
pub mod terminal;
pub mod text;
