"""Visitors' text shown as text: markdown that renders as the text, code spans it cannot close, plotly labels."""
import html
import random
import re
import string


from dpviz.echo import ELLIPSIS, WORD_JOINER, code_span, cut, echo, markdown_text, plotly_text
from user_text_traces import unescape_markdown

PAYLOADS = [
    '<a href="http://evil.example/x">click</a>', "<img src=http://evil.example/i.png>", "[link](http://evil.example)",
    "![img](http://evil.example/i.png)", "https://evil.example/a www.evil.example WWW.Evil.example a@evil.example",
    ":smile: :material/home: :red[x] $x^2$ **b** _i_ ~~s~~ # h &lt;b&gt; \\[x\\]", "```", "`lead", "trail`", " both ",
    "<b>bold</b><br><span style='color:red'>x</span>", "line one\nline two\r\n\n    indented", "\ud800 lone surrogate",
]
ALPHABET = string.printable + "`\\<>[]()!*_~:@$&#…é\u2060"


def random_texts(count: int = 500, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = [rng.choice(PAYLOADS) + "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(30))) for _ in range(count)]
    return PAYLOADS + texts + ["".join(rng.choice("`` \\") for _ in range(rng.randrange(1, 12))) for _ in range(count)]


def one_line(text: str) -> str:
    return re.sub(r"\r\n?|\n", " ", text).replace("\ud800", "\ufffd")


def test_markdown_text_escapes_every_punctuation_character_and_renders_as_the_text():
    for text in random_texts():
        check_markdown_text(text)


def check_markdown_text(text: str) -> None:
    markdown = markdown_text(text)
    shown = unescape_markdown(markdown)
    assert shown.replace(WORD_JOINER, "") == one_line(text).replace(WORD_JOINER, "")
    assert "\n" not in markdown and "\r" not in markdown
    # What Streamlit would still make a link, an emoji or an icon of after the escapes are resolved.
    assert not re.search(r"[:@](?!\u2060)|www\.", shown, re.IGNORECASE)


def test_a_code_span_cannot_be_closed_by_its_text():
    for text in random_texts():
        check_code_span(text)


def check_code_span(text: str) -> None:
    span = code_span(text)
    fence = re.match(r"`+", span).group()
    assert span.endswith(fence) and not span.endswith("`" + fence)
    inner = span[len(fence):-len(fence)]
    assert fence not in re.findall(r"`+", inner)  # CommonMark closes a code span only on a run of equal length
    if inner.strip() and inner.startswith(" ") and inner.endswith(" "):
        inner = inner[1:-1]  # the one space CommonMark strips from each end
    assert inner.replace(WORD_JOINER, "") == (one_line(text).replace(WORD_JOINER, "") or " ")
    assert ":material/" not in span  # Streamlit rewrites it before parsing, even inside code


def test_plotly_text_has_no_tag_and_decodes_to_the_text():
    for text in random_texts():
        shown = plotly_text(text)
        assert "<" not in shown and ">" not in shown
        assert html.unescape(shown) == one_line(text)


def test_values_are_cut_with_an_ellipsis():
    assert cut("x" * 100, 10) == "x" * 9 + ELLIPSIS and cut("short", 10) == "short" and cut("x" * 9, None) == "x" * 9
    shown = echo("y" * 100_000)
    assert len(shown) <= 80 and shown.startswith("'yyy") and shown.endswith(ELLIPSIS + "'")
    assert echo("\x00" * 500, 20).endswith(ELLIPSIS + "'") and len(echo("\x00" * 500, 20)) <= 20
    assert echo("gpu") == "'gpu'" and echo(12) == "12" and len(echo(10 ** 4000)) == 80
    assert len(markdown_text("[" * 1000, limit=60)) <= 2 * 60 and len(plotly_text("<" * 1000, limit=40)) <= 4 * 40
    assert unescape_markdown(markdown_text("a" * 1000, limit=60)) == "a" * 59 + ELLIPSIS


def test_what_each_form_looks_like():
    assert markdown_text("[x](http://e.example)") == "\\[x\\]\\(http\\:\u2060\\/\\/e\\.example\\)"
    assert markdown_text("plain words") == "plain words"
    assert code_span("a`b") == "``a`b``" and code_span("`x") == "`` `x ``" and code_span("") == "` `"
    assert plotly_text('<a href="x">&amp;</a>') == '&lt;a href="x"&gt;&amp;amp;&lt;/a&gt;'
