"""GET …/readme: a repository's README as sanitized HTML for the dashboard."""

from __future__ import annotations

from hubsvc.web.markdown import render

from .gitcli import git, remote

PAYLOAD = """# Hello *world*

| a | b |
|---|---|
| 1 | 2 |

<script>alert(1)</script>
<img src=x onerror="alert(2)">
<svg onload="alert(3)"><circle r="1"/></svg>

[click](javascript:alert(4)) and [site](https://example.com)

<a href="JaVaScRiPt:alert(5)">x</a> <iframe src="https://evil.example"></iframe>
<style>body{display:none}</style> <p style="color:red" onclick="alert(6)">styled</p>
"""


def test_render_keeps_markdown_and_drops_every_payload():
    html = render(PAYLOAD)
    assert "<h1>Hello <em>world</em></h1>" in html
    assert "<table>" in html and "<td>1</td>" in html
    assert 'href="https://example.com"' in html
    lowered = html.lower()
    for bad in ("<script", "onerror", "onload", "onclick", "<svg", 'href="javascript', "<iframe"):
        assert bad not in lowered, bad
    # markdown-it leaves a javascript: link as its text; nh3 drops the raw tag's href.
    assert "[click](javascript:alert(4))" in html and "<a rel=" in html
    assert "<style" not in lowered and "style=" not in lowered


async def test_readme_of_a_pushed_repository(client, alice, bob, tmp_path):
    resp = await client.post(
        "/api/repositories",
        json={"name": "docs", "visibility": "private"},
        headers=alice.headers,
    )
    assert resp.status == 201
    resp = await client.get("/api/repositories/alice/docs/readme", headers=alice.headers)
    assert resp.status == 404  # empty
    work = tmp_path / "work"
    await git("init", "-q", "-b", "main", str(work))
    (work / "ReadMe.md").write_text(PAYLOAD)
    await git("add", ".", cwd=work)
    await git("commit", "-qm", "readme", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "docs"), "main", cwd=work)
    resp = await client.get("/api/repositories/alice/docs/readme", headers=alice.headers)
    assert resp.status == 200
    body = await resp.json()
    assert body["path"] == "ReadMe.md" and "<h1>Hello" in body["html"]
    assert "<script" not in body["html"] and "onerror" not in body["html"]
    # Private: the same 404 to someone who can't read it as for a missing repository.
    resp = await client.get("/api/repositories/alice/docs/readme", headers=bob.headers)
    assert resp.status == 404
