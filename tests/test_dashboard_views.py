"""The dashboard's repository pages in Chromium: a commit's diff, branches, pages of
commits, issues and pull requests, and their closed ones."""

from __future__ import annotations

from .dashboard import (  # noqa: F401 (server and browser are fixtures)
    PASSWORD,
    browser,
    create,
    push,
    server,
    shoot,
    sign_in,
    sign_up,
    wait_for,
    wait_text,
)


def texts(browser, css: str) -> list[str]:
    return [e.text for e in browser.find_elements("css selector", css)]


def test_commit_diff_branches_and_pages_of_commits(server, browser, tmp_path):
    auth = sign_up(server, "historian")
    create(server, auth, "/api/repositories", {"name": "hist"})
    run = push(server, "historian", "hist", {"README.md": "# Main readme\n"}, tmp_path / "w")
    work = tmp_path / "w"
    for n in range(34):
        (work / "log.txt").write_text("".join(f"line {i}\n" for i in range(n + 1)))
        run("add", ".")
        run("commit", "-qm", f"step {n}")
    run("checkout", "-qb", "feature")
    (work / "README.md").write_text("# Feature readme\n")
    (work / "only-on-feature.txt").write_text("new\n")
    run("add", ".")
    run("commit", "-qm", "feature work")
    host = server.url.replace("http://", f"http://historian:{PASSWORD.replace(' ', '%20')}@")
    run("push", "-q", f"{host}/historian/hist.git", "main", "feature")
    sign_in(browser, server, "historian")
    browser.get(server.url + "/#/r/historian/hist")
    wait_text(browser, "#readme", "Main readme")
    assert "only-on-feature.txt" not in browser.find_element("id", "tree").text
    # From the recent commits to one commit's diff.
    wait_for(browser, "#commits li:first-child a").click()
    wait_text(browser, "#commit-title", "step 33")
    assert texts(browser, ".diff .add") == ["+line 33"]
    assert "1 file changed, +1 −0" in browser.find_element("css selector", "main h2").text
    meta = browser.find_element("css selector", "main p.muted").text
    assert "parent " in meta and "http" not in meta  # the parent is a short link
    assert "null" not in browser.find_element("tag name", "main").text
    shoot(browser, "commit")
    # Switching the branch: the tree, the README and the commits follow it.
    browser.get(server.url + "/#/r/historian/hist")
    wait_text(browser, "#readme", "Main readme")
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "branch")).select_by_value("feature")
    wait_text(browser, "#readme", "Feature readme")
    assert browser.execute_script("return location.hash") == "#/r/historian/hist/tree/feature"
    assert "only-on-feature.txt" in browser.find_element("id", "tree").text
    assert texts(browser, "#commits .msg")[0] == "feature work"
    shoot(browser, "repository-branch")
    browser.find_element("link text", "only-on-feature.txt").click()
    wait_text(browser, "#file", "new")
    # Every commit of the branch, thirty a page: no gap, no repeat.
    browser.get(server.url + "/#/r/historian/hist/tree/feature")
    wait_text(browser, "#readme", "Feature readme")
    browser.find_element("css selector", "a[href$='/commits/feature']").click()
    wait_text(browser, "main h1", "Commits")
    first = texts(browser, "#commits .msg")
    assert len(first) == 30
    shoot(browser, "commits")
    browser.find_element("id", "next").click()
    wait_text(browser, "#pager", "page 2")
    second = texts(browser, "#commits .msg")
    expected = ["feature work"] + [f"step {n}" for n in reversed(range(34))] + ["files"]
    assert first + second == expected
    assert not browser.find_elements("id", "next")
    browser.find_element("id", "prev").click()
    wait_text(browser, "#pager", "page 1")


def test_issues_and_pulls_by_state_and_page(server, browser, tmp_path):
    auth = sign_up(server, "tracker")
    create(server, auth, "/api/repositories", {"name": "bugs"})
    base = "/api/repositories/tracker/bugs"
    for n in range(33):
        create(server, auth, f"{base}/issues", {"title": f"bug {n}"})
    for number in (1, 2):
        status, body = server.request("PATCH", f"{base}/issues/{number}", {"state": "closed"}, auth)
        assert status == 200, body
    run = push(server, "tracker", "bugs", {"a.txt": "a\n"}, tmp_path / "w")
    for branch in ("one", "two"):
        run("checkout", "-qb", branch, "main")
        (tmp_path / "w" / f"{branch}.txt").write_text(branch)
        run("add", ".")
        run("commit", "-qm", branch)
        host = server.url.replace("http://", f"http://tracker:{PASSWORD.replace(' ', '%20')}@")
        run("push", "-q", f"{host}/tracker/bugs.git", branch)
        create(server, auth, f"{base}/pulls", {"title": f"pull {branch}", "head": branch})
    status, body = server.request("PATCH", f"{base}/pulls/35", {"state": "closed"}, auth)
    assert status == 200, body
    create(server, auth, "/api/users/me/settings/preferences", {"theme": "dark"})  # dark shots
    sign_in(browser, server, "tracker")
    browser.get(server.url + "/#/r/tracker/bugs")
    wait_text(browser, "main", "Open issues")
    browser.find_element("css selector", "a[href$='/issues?state=open']").click()
    wait_text(browser, "#states .current", "open")
    page1 = texts(browser, "#issues-list li")
    assert len(page1) == 30 and page1[0].startswith("open #33 bug 32")
    shoot(browser, "issues")
    browser.find_element("id", "next").click()
    wait_text(browser, "#pager", "page 2")
    assert [t.split(" tracker")[0] for t in texts(browser, "#issues-list li")] == ["open #3 bug 2"]
    browser.find_element("link text", "closed").click()
    wait_text(browser, "#states .current", "closed")
    closed = [t.split(" tracker")[0] for t in texts(browser, "#issues-list li")]
    assert closed == ["closed #2 bug 1", "closed #1 bug 0"]
    assert not browser.find_elements("id", "pager")
    shoot(browser, "issues-closed")
    browser.find_element("link text", "#1 bug 0").click()
    wait_text(browser, "main h1", "bug 0 #1")
    assert "closed" in browser.find_element("css selector", "#state").text
    browser.get(server.url + "/#/r/tracker/bugs/pulls")
    wait_text(browser, "#pulls-list", "pull one")
    assert "pull two" not in browser.find_element("id", "pulls-list").text
    browser.find_element("link text", "closed").click()
    wait_text(browser, "#states .current", "closed")
    assert [t.split(" tracker")[0] for t in texts(browser, "#pulls-list li")] == [
        "closed #35 pull two"
    ]
    shoot(browser, "pulls-closed")
    browser.find_element("link text", "all").click()
    wait_text(browser, "#states .current", "all")
    assert len(texts(browser, "#pulls-list li")) == 2
