//! Renderers of a run: text for terminals, JSON, and a self-contained HTML
//! page.

pub mod html;
pub mod json;
pub mod text;
