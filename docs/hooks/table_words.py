"""MkDocs hook: a word of code in a table cell never breaks inside itself.

Material lets code break anywhere, and Chromium also breaks a name such as `<schema>.<table>` or
`kafka.topic-config.<name>` between its punctuation: in a narrow column an option's name read as
three pieces. Here each word (text between spaces) of a table cell's code is wrapped in
`<span class="word">`, which the stylesheet keeps whole (white-space: nowrap), while the code may
still wrap between its words (a SQL option `'format' = 'debezium-json'` over two lines). So a
table cell is never narrower than its longest word (tests/docs/test_layout.py checks it), and a
table too wide for a phone scrolls instead (stylesheets/extra.css).
"""
import re

CELL = re.compile(r"<(td|th)\b[^>]*>.*?</\1>", re.S)
CODE = re.compile(r"(<code>)(.*?)(</code>)", re.S)
WORD = re.compile(r"[^\s<>]+(?![^<]*>)")  # text between spaces, outside any tag


def _words(code: "re.Match[str]") -> str:
    text = code[2]
    if "<" in text:  # markup inside the code (a link, highlighting): leave it as it is
        return code[0]
    return code[1] + WORD.sub(lambda w: f'<span class="word">{w[0]}</span>', text) + code[3]


def on_page_content(html, page, config, files):
    return CELL.sub(lambda cell: CODE.sub(_words, cell[0]), html)
