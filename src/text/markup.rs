//! Markup removal for crawled pages: what a reader sees, not the HTML around it.
//!
//! A single forward scan, written here rather than taken from a crate: the HTML-to-text crates
//! either build a whole DOM (html5ever) or render links as "text (url)" (nanohtml2text), and a
//! URL the reader never sees should not become a feature. Entities are decoded by `html-escape`.
//! Block-level tags become a space so words on both sides do not run together; inline tags
//! (`<b>`, `<a>`, `<span>`...) vanish, so "北京<b>烤鸭</b>" stays one word for jieba. Text with
//! no `<` and no `&` is returned as it is.

use std::borrow::Cow;

/// Elements whose content is not text: skipped with their bodies.
const RAW_TEXT: [&str; 4] = ["script", "style", "template", "noscript"];

/// Elements that sit inside a line of text: removed without a space.
const INLINE: [&str; 34] = [
    "a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font", "i",
    "ins", "kbd", "label", "mark", "nobr", "q", "rb", "ruby", "s", "samp", "small", "span",
    "strong", "sub", "sup", "time", "tt", "u", "var", "wbr",
];

pub fn strip_markup(html: &str) -> Cow<'_, str> {
    // Bytes, not characters: both are ASCII, and most texts have neither and are scanned whole
    // (by characters this check was 3.7% of the signature stage on a million generated pages).
    if memchr::memchr2(b'<', b'&', html.as_bytes()).is_none() {
        return Cow::Borrowed(html);
    }
    let mut text = String::with_capacity(html.len());
    let mut rest = html;
    // By byte with the memchr crate's vector search: `str::find` by character was 1.7% of the
    // signature stage on Chinese pages. '<' is ASCII, so the byte found starts a character.
    while let Some(open) = memchr::memchr(b'<', rest.as_bytes()) {
        text.push_str(&rest[..open]);
        let after = &rest[open..];
        match skip_markup(after) {
            Some((skipped, separator)) => {
                if separator {
                    text.push(' ');
                }
                rest = &after[skipped..];
            }
            None => {
                // A '<' that opens nothing ("a < b"): keep it as text.
                text.push('<');
                rest = &after[1..];
            }
        }
    }
    text.push_str(rest);
    match html_escape::decode_html_entities(&text) {
        Cow::Borrowed(_) => Cow::Owned(text),
        Cow::Owned(decoded) => Cow::Owned(decoded),
    }
}

/// At a '<': the length of the markup that starts here and whether it separates words, or
/// `None` when this '<' is ordinary text.
fn skip_markup(at: &str) -> Option<(usize, bool)> {
    if let Some(comment) = at.strip_prefix("<!--") {
        // Comments are invisible: no space. `<!-->` and `<!--->` are empty comments.
        let end = if comment.starts_with('>') {
            5
        } else if comment.starts_with("->") {
            6
        } else {
            comment.find("-->").map_or(at.len(), |e| 4 + e + 3)
        };
        return Some((end, false));
    }
    let bytes = at.as_bytes();
    let second = *bytes.get(1)?;
    let closing = second == b'/';
    let name_start = if closing { 2 } else { 1 };
    let first = *bytes.get(name_start)?;
    if !(first.is_ascii_alphabetic() || (!closing && (second == b'!' || second == b'?'))) {
        return None;
    }
    let tag_end = end_of_tag(at)?;
    // The name runs to whitespace, '/' or '>' (custom elements have hyphens: <script-loader>),
    // and is compared in place, whatever its case.
    let rest = &at[name_start..];
    let name_len = rest
        .char_indices()
        .find(|&(_, c)| c.is_whitespace() || c == '/' || c == '>')
        .map_or(rest.len(), |(end, _)| end);
    let name = &rest[..name_len];
    let raw_text = RAW_TEXT.iter().find(|raw| raw.eq_ignore_ascii_case(name));
    if let Some(raw) = raw_text.filter(|_| !closing && !at[..tag_end].ends_with("/>")) {
        let body_end = find_closing(&at[tag_end..], raw).map_or(at.len(), |end| tag_end + end);
        return Some((body_end, true));
    }
    let inline = INLINE
        .iter()
        .any(|inline| inline.eq_ignore_ascii_case(name));
    Some((tag_end, !inline))
}

/// Index just past the '>' that ends the tag starting at `at`, skipping quoted attribute values
/// (a quote opens a value only right after '=', as in HTML: `<img alt=Don't>` has none).
fn end_of_tag(at: &str) -> Option<usize> {
    let mut quote: Option<u8> = None;
    let mut after_equals = false;
    for (i, &b) in at.as_bytes().iter().enumerate().skip(1) {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') if after_equals => quote = Some(b),
            (None, b'>') => return Some(i + 1),
            (None, b'<') => return None, // "a <b c" then a new tag: the first '<' was text
            _ => {}
        }
        if !b.is_ascii_whitespace() {
            after_equals = b == b'=';
        }
    }
    None
}

/// Index just past `</name ...>` in `body`, case-insensitively, without copying the body.
fn find_closing(body: &str, name: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut from = 0;
    while let Some(found) = body[from..].find("</") {
        let start = from + found + 2;
        let end = start + name.len();
        let same_name = bytes
            .get(start..end)
            .is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()));
        let name_ends = bytes
            .get(end)
            .is_none_or(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>');
        if same_name && name_ends {
            return Some(body[end..].find('>').map_or(body.len(), |e| end + e + 1));
        }
        from = start;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_go_and_text_stays() {
        assert_eq!(
            strip_markup("<html><body><h1>Title</h1><p>One <b>bold</b> word.</p></body></html>"),
            "   Title  One bold word.   "
        );
        assert_eq!(strip_markup("北京<b>烤鸭</b>"), "北京烤鸭");
    }

    #[test]
    fn scripts_styles_and_comments_go_with_their_bodies() {
        assert_eq!(
            strip_markup("a<script type=\"x\">if (1 < 2) { b = '</p>'; }</script>c"),
            "a c"
        );
        assert_eq!(strip_markup("a<STYLE>p { color: red }</Style >c"), "a c");
        assert_eq!(strip_markup("a<!-- <p>hidden</p> -->c"), "ac");
        assert_eq!(strip_markup("北京<!---->烤鸭<!-->x<!--->y"), "北京烤鸭xy");
        // Custom elements named like raw-text ones are ordinary tags.
        assert_eq!(
            strip_markup("<script-loader>kept</script-loader>"),
            " kept "
        );
        assert_eq!(strip_markup("a<script>x</scripts>y</script>b"), "a b");
        assert_eq!(strip_markup("a<script/>c"), "a c");
        // Unclosed: everything after is script.
        assert_eq!(strip_markup("a<script>var x"), "a ");
    }

    #[test]
    fn link_urls_are_not_text() {
        assert_eq!(
            strip_markup("see <a href=\"https://example.org/x?a=1&b=2\">the page</a>."),
            "see the page."
        );
        assert_eq!(strip_markup("<img alt='a > b' src=x>z"), " z");
        assert_eq!(strip_markup("<img alt=Don't src=x>z 'q'"), " z 'q'");
        assert_eq!(strip_markup("北京<u>烤鸭</u>"), "北京烤鸭");
    }

    #[test]
    fn entities_decode_after_tags_go() {
        assert_eq!(
            strip_markup("a &amp; b &lt;p&gt; &#20013;&#x6587;"),
            "a & b <p> 中文"
        );
        assert_eq!(strip_markup("&nbsp;x"), "\u{a0}x");
    }

    #[test]
    fn a_lone_less_than_is_text() {
        assert_eq!(strip_markup("1 < 2 and 3 <= 4"), "1 < 2 and 3 <= 4");
        assert_eq!(strip_markup("x <"), "x <");
        assert_eq!(strip_markup("a <b c <i>d</i>"), "a <b c d");
        assert!(matches!(strip_markup("no markup"), Cow::Borrowed(_)));
    }

    #[test]
    fn doctype_and_processing_instructions() {
        assert_eq!(
            strip_markup("<!DOCTYPE html><?xml version=\"1.0\"?>x"),
            "  x"
        );
    }
}
