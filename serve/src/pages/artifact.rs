//! A run's artifacts: `/runs/{id}/artifacts/{seq}` shows the ticket that
//! fact `seq` (`artifact.put`, or an `artifact.get` that found one)
//! carries and previews the bytes: text and JSON as text, images (PNG,
//! JPEG, GIF, WebP) as images. `/runs/{id}/artifacts/{seq}/raw`
//! downloads them with their recorded media type, always as an
//! attachment; only `?inline=1` on one of those four image types is
//! served inline, as the image type itself.
//!
//! HTML, SVG, scripts and any type not named above are never rendered:
//! no preview, and their download is an attachment under the console's
//! Content-Security-Policy and `X-Content-Type-Options: nosniff` (set on
//! every response), so a browser saves them and runs nothing.
//!
//! An artifact is reached through the run whose fact names it, never by
//! its digest: what may read a run may read its artifacts, nothing more.

use reel_core::fact::ArtifactMeta;

use super::*;

/// The most bytes of a text or JSON artifact previewed.
const PREVIEW_BYTES: usize = 256 * 1024;

/// How an artifact may be shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Preview {
    /// As text in a `<pre>`, escaped.
    Text,
    /// Pretty-printed JSON, escaped.
    Json,
    /// An `<img>` of this exact type.
    Image(&'static str),
    /// Download only.
    None,
}

/// The preview a media type gets. The type is what was recorded: only
/// its essence (before any `;`), lower-cased, is read.
pub(crate) fn preview(media_type: &str) -> Preview {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "image/png" => Preview::Image("image/png"),
        "image/jpeg" | "image/jpg" => Preview::Image("image/jpeg"),
        "image/gif" => Preview::Image("image/gif"),
        "image/webp" => Preview::Image("image/webp"),
        "application/json" => Preview::Json,
        e if e.starts_with("application/") && e.ends_with("+json") => Preview::Json,
        "text/plain"
        | "text/markdown"
        | "text/csv"
        | "text/tab-separated-values"
        | "text/x-log"
        | "text/x-diff"
        | "text/x-patch" => Preview::Text,
        _ => Preview::None,
    }
}

/// Whether `fact` names an artifact a page can open.
pub(super) fn names_artifact(fact: &Fact) -> bool {
    match &fact.kind {
        reel_core::FactKind::ArtifactPut(_) => true,
        reel_core::FactKind::ArtifactGet(g) => g.meta.is_some(),
        _ => false,
    }
}

async fn read(
    console: &Access,
    run_id: String,
    seq: String,
) -> Result<(ArtifactMeta, Option<Vec<u8>>), Failed> {
    let seq: u64 = seq.parse().map_err(|_| {
        Failed(
            StatusCode::BAD_REQUEST,
            format!(
                "{seq:?} is not a fact's seq: artifacts are addressed as /runs/RUN/artifacts/SEQ"
            ),
        )
    })?;
    let console = console.clone();
    blocking(move || console.artifact(&run_id, seq).map_err(read_error)).await
}

/// `/runs/{id}/artifacts/{seq}`: the ticket and a preview.
pub(crate) async fn artifact(
    console: Access,
    Path((run_id, seq)): Path<(String, String)>,
) -> Response {
    let (meta, bytes) = match read(&console, run_id.clone(), seq.clone()).await {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    let href = run_href(&run_id);
    let mut body = format!(
        "<main class=\"panel artifact\"><h1><span class=\"muted\">artifact</span> \
         <span class=\"mono\">{}</span></h1><p><a href=\"{h}#seq-{s}\">← fact #{s} of run \
         <span class=\"mono\">{}</span></a></p><table class=\"fields\">",
        escape(&meta.id),
        escape(&run_id),
        h = escape(&href),
        s = escape(&seq),
    );
    let origin = format!(
        "run {} · call {}",
        meta.origin.run_id.as_deref().unwrap_or("(none)"),
        meta.origin.call_id
    );
    for (name, value) in [
        ("media type", meta.media_type.clone()),
        ("size", format!("{} B", meta.size)),
        ("digest", meta.digest.clone()),
        ("origin", origin),
    ] {
        let _ = write!(
            body,
            "<tr><th>{name}</th><td class=\"mono\">{}</td></tr>",
            escape(&value)
        );
    }
    body.push_str("</table>\n");
    let raw = format!("{href}/artifacts/{}/raw", escape(&seq));
    match &bytes {
        None => body.push_str(
            "<p class=\"bad\" id=\"no-bytes\">The archive does not hold this artifact's bytes \
             (its store kept them elsewhere, or they were pruned): only its ticket is shown.</p>",
        ),
        Some(bytes) => {
            let _ = write!(
                body,
                "<p><a id=\"download\" href=\"{}\" download>Download ({} B, {})</a></p>",
                escape(&raw),
                bytes.len(),
                escape(&meta.media_type)
            );
            preview_section(&mut body, &meta, bytes, &raw);
        }
    }
    body.push_str("</main>");
    Html(page(
        &format!("reel: artifact {}", meta.id),
        "artifact",
        console.stale(),
        &body,
    ))
    .into_response()
}

fn preview_section(body: &mut String, meta: &ArtifactMeta, bytes: &[u8], raw: &str) {
    let cut = &bytes[..bytes.len().min(PREVIEW_BYTES)];
    let more = if cut.len() < bytes.len() {
        format!(
            "<p class=\"muted\">the first {} of {} bytes</p>",
            cut.len(),
            bytes.len()
        )
    } else {
        String::new()
    };
    match preview(&meta.media_type) {
        Preview::Image(_) => {
            let _ = write!(
                body,
                "<figure id=\"preview\" data-preview=\"image\"><img src=\"{}?inline=1\" alt=\"artifact {}\"></figure>",
                escape(raw),
                escape(&meta.id)
            );
        }
        Preview::Json => {
            let shown = match serde_json::from_slice::<serde_json::Value>(bytes) {
                Ok(v) if bytes.len() <= PREVIEW_BYTES => {
                    serde_json::to_string_pretty(&v).unwrap_or_default()
                }
                _ => String::from_utf8_lossy(cut).into_owned(),
            };
            let _ = write!(
                body,
                "<pre id=\"preview\" data-preview=\"json\" class=\"raw\">{}</pre>{more}",
                escape(&shown)
            );
        }
        Preview::Text => {
            let _ = write!(
                body,
                "<pre id=\"preview\" data-preview=\"text\" class=\"raw\">{}</pre>{more}",
                escape(&String::from_utf8_lossy(cut))
            );
        }
        Preview::None => {
            let _ = write!(
                body,
                "<p id=\"preview\" data-preview=\"none\" class=\"muted\">Not previewed: {} is \
                 shown only as a download. HTML, SVG, scripts and types the console does not \
                 know are never rendered here.</p>",
                escape(&meta.media_type)
            );
        }
    }
}

/// The download's query.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RawQuery {
    /// `1`: inline, for the four image types only.
    inline: Option<String>,
}

/// `/runs/{id}/artifacts/{seq}/raw`: the bytes.
pub(crate) async fn artifact_raw(
    console: Access,
    Path((run_id, seq)): Path<(String, String)>,
    Query(q): Query<RawQuery>,
) -> Response {
    let (meta, bytes) = match read(&console, run_id, seq).await {
        Ok(found) => found,
        Err(r) => return r.into_response(),
    };
    let Some(bytes) = bytes else {
        return Failed(
            StatusCode::NOT_FOUND,
            format!(
                "the archive does not hold the bytes of artifact {} ({})",
                meta.id, meta.digest
            ),
        )
        .into_response();
    };
    let name: String = meta
        .id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let wants_inline = q.inline.as_deref() == Some("1");
    let (content_type, disposition) = match (preview(&meta.media_type), wants_inline) {
        (Preview::Image(t), true) => (t.to_owned(), "inline".to_owned()),
        _ => (
            download_type(&meta.media_type),
            format!("attachment; filename=\"{name}\""),
        ),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        bytes,
    )
        .into_response()
}

/// The recorded media type when it is one (`type/subtype[; params]` of
/// visible ASCII), else `application/octet-stream`.
fn download_type(recorded: &str) -> String {
    let ok = recorded.len() <= 200
        && recorded.chars().all(|c| c.is_ascii_graphic() || c == ' ')
        && recorded
            .split(';')
            .next()
            .is_some_and(|e| {
                let mut parts = e.trim().split('/');
                matches!((parts.next(), parts.next(), parts.next()), (Some(t), Some(s), None) if !t.is_empty() && !s.is_empty())
            });
    if ok {
        recorded.to_owned()
    } else {
        "application/octet-stream".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_json_and_four_image_types_are_previewed() {
        for (t, want) in [
            ("text/plain", Preview::Text),
            ("text/plain; charset=utf-8", Preview::Text),
            ("text/markdown", Preview::Text),
            ("application/json", Preview::Json),
            ("application/ld+json", Preview::Json),
            ("IMAGE/PNG", Preview::Image("image/png")),
            ("image/jpeg", Preview::Image("image/jpeg")),
            ("image/gif", Preview::Image("image/gif")),
            ("image/webp", Preview::Image("image/webp")),
            ("text/html", Preview::None),
            ("text/html; charset=utf-8", Preview::None),
            ("image/svg+xml", Preview::None),
            ("application/xhtml+xml", Preview::None),
            ("text/javascript", Preview::None),
            ("application/javascript", Preview::None),
            ("text/xml", Preview::None),
            ("application/pdf", Preview::None),
            ("", Preview::None),
            ("text/plain\r\nX-Evil: 1", Preview::None),
        ] {
            assert_eq!(preview(t), want, "{t:?}");
        }
    }

    #[test]
    fn a_recorded_type_that_is_no_header_value_downloads_as_bytes() {
        assert_eq!(download_type("text/html"), "text/html");
        assert_eq!(
            download_type("text/plain; charset=utf-8"),
            "text/plain; charset=utf-8"
        );
        for bad in ["text/plain\r\nX-Evil: 1", "nonsense", "a/b/c", "", "é/x"] {
            assert_eq!(download_type(bad), "application/octet-stream", "{bad:?}");
        }
    }
}
