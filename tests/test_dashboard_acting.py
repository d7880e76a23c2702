"""The dashboard acting, in Chromium: people sign up, open repositories and issues, talk
live across two browsers, review a pull request on its lines and merge it once the
protection that held it is met, each through the same API requests any client sends."""

from __future__ import annotations

import urllib.request

from .browser import chromium, quit_chromium
from .dashboard import (  # noqa: F401 (server and browser are fixtures)
    PASSWORD,
    browser,
    create,
    no_script_ran,
    push,
    server,
    shoot,
    sign_in,
    sign_up,
    wait_for,
    wait_text,
)


def fill(browser, css: str, text: str) -> None:
    field = wait_for(browser, css)
    field.clear()
    field.send_keys(text)


def choose(browser, css: str, value: str) -> None:
    """Pick an option, again if a live re-read replaced the select meanwhile."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def attempt(b) -> bool:
        try:
            Select(b.find_element(By.CSS_SELECTOR, css)).select_by_value(value)
        except (NoSuchElementException, StaleElementReferenceException):
            return False
        return True

    WebDriverWait(browser, 10, poll_frequency=0.05).until(attempt)


def test_an_issue_opened_here_is_answered_live_from_another_browser(server, browser):
    from selenium.webdriver.common.by import By

    # Sign-up is open on this server: the page offers it, and a person uses the form.
    browser.get(server.url + "/#/sign-in")
    wait_for(browser, "#to-sign-up").click()
    fill(browser, "#new-username", "opener")
    fill(browser, "#new-name", "Opal Opener")
    fill(browser, "#new-email", "opener@example.com")
    fill(browser, "#new-password", PASSWORD)
    shoot(browser, "sign-up")
    browser.find_element(By.CSS_SELECTOR, "#sign-up button[type=submit]").click()
    wait_text(browser, "#status", "live")
    assert browser.find_element(By.ID, "who").text == "opener"
    wait_for(browser, "#nav-new").click()
    fill(browser, "#repo-name", "board")
    fill(browser, "#repo-description", "Where we plan")
    shoot(browser, "new-repository")
    browser.find_element(By.ID, "create-repo").click()
    wait_for(browser, "#clone-url")
    clone = browser.find_element(By.ID, "clone-url").get_attribute("value")
    assert clone == f"{server.url}/opener/board.git"
    shoot(browser, "repository")
    sign_up(server, "helper")
    status, signed = server.request(
        "POST", "/auth/sign-in", {"username": "opener", "password": PASSWORD}
    )
    owner = {"Authorization": f"Bearer {signed['token']}"}
    create(server, owner, "/api/repositories/opener/board/milestones", {"title": "Week 48"})
    browser.find_element(By.ID, "repo-new-issue").click()
    fill(browser, "#issue-title", "Plan the week")
    fill(browser, "#issue-body", "**Monday** first; cc @helper, see #1 and `#2`")
    fill(browser, "#issue-labels", "planning, ui")
    shoot(browser, "new-issue")
    browser.find_element(By.ID, "submit-issue").click()
    wait_for(browser, "#thread-body strong")
    assert browser.execute_script("return location.hash") == "#/r/opener/board/issues/1"
    mention = browser.find_element(By.CSS_SELECTOR, "#thread-body a[href='/helper']")
    assert mention.text == "@helper"
    assert browser.find_element(By.CSS_SELECTOR, "#thread-body code").text == "#2"
    chips = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#label-chips .label")]
    assert chips == ["planning", "ui"]
    wait_text(browser, "#status", "live")
    # A reaction (one per person and kind) and a milestone, each from the sidebar or bar.
    browser.find_element(By.CSS_SELECTOR, "#item-reactions .add-reaction").click()
    browser.find_element(
        By.CSS_SELECTOR, "#item-reactions .reaction-pick[data-content='rocket']"
    ).click()
    wait_text(browser, "#item-reactions", "🚀 1")
    choose(browser, "#milestone-select", "1")
    wait_text(browser, "#milestone-shown .milestone", "Week 48")

    other = chromium()
    try:
        sign_in(other, server, "helper")
        # The link a notice carries (a forge's path) opens the page at its #/ route.
        other.get(server.url + "/opener/board/issues/1")
        wait_for(other, "#comment-body")
        assert other.execute_script("return location.pathname + location.hash") == (
            "/#/r/opener/board/issues/1"
        )
        # A reader of a public repository may comment, not relabel or close it.
        assert not other.find_elements(By.ID, "labels-edit")
        assert not other.find_elements(By.ID, "toggle-state")
        # helper's rocket too: two people, one count each.
        wait_text(other, "#item-reactions", "🚀 1")
        other.find_element(
            By.CSS_SELECTOR, "#item-reactions .reaction[data-content='rocket']"
        ).click()
        wait_text(browser, "#item-reactions", "🚀 2")
        fill(other, "#comment-body", "On it: *Tuesday* works for me, fixes #1")
        other.find_element(By.ID, "comment").click()
        wait_text(other, "#timeline", "Tuesday works for me")
        # The first browser sees it live, rendered, #1 linked.
        wait_text(browser, "#timeline", "Tuesday works for me")
        assert browser.find_element(By.CSS_SELECTOR, "#timeline em").text == "Tuesday"
        assert browser.find_elements(By.CSS_SELECTOR, "#timeline a[href='/opener/board/issues/1']")
        browser.find_element(By.ID, "labels-edit").click()
        fill(browser, "#labels-input", "planning, urgent")
        browser.find_element(By.ID, "labels-save").click()
        wait_text(browser, "#label-chips", "urgent")
        browser.find_element(By.ID, "toggle-state").click()
        wait_text(browser, "#state", "closed")
        # The labels and the state reach the other browser through the event.
        wait_text(other, "#state", "closed")
        wait_text(other, "#label-chips", "urgent")
        no_script_ran(other)
    finally:
        quit_chromium(other)
    shoot(browser, "issue")
    wait_text(browser, "#toggle-state", "Reopen")  # the form the event's re-read brought
    browser.find_element(By.ID, "toggle-state").click()
    wait_text(browser, "#state", "open")
    # A release with an asset, listed with its download.
    status, made = server.request(
        "POST",
        "/api/repositories/opener/board/releases",
        {"tagName": "v1.0", "name": "First week", "body": "Planned and done."},
        owner,
    )
    assert status == 201, made
    upload = urllib.request.Request(
        f"{server.url}/api/repositories/opener/board/releases/{made['release']['id']}"
        "/assets?name=plan.txt",
        data=b"monday\ntuesday\n",
        method="POST",
        headers={**owner, "Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(upload) as resp:
        assert resp.status == 201
    browser.get(server.url + "/opener/board/releases")
    wait_text(browser, "#releases", "plan.txt")
    link = browser.find_element(By.CSS_SELECTOR, "#releases .asset a")
    assert link.get_attribute("href").startswith(server.url + "/api/repositories/opener/board/")
    assert "15 B · 0 downloads" in browser.find_element(By.ID, "releases").text
    shoot(browser, "releases")
    no_script_ran(browser)
    # Signed out, the issue still reads (a public repository), with no form to act.
    browser.find_element(By.ID, "sign-out").click()
    wait_for(browser, "#login")
    browser.get(server.url + "/opener/board/issues/1")
    wait_text(browser, "#item-reactions", "2")
    assert browser.find_element(By.ID, "item-reactions").text == "🚀 2"
    assert "Sign in to comment." in browser.find_element(By.TAG_NAME, "main").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#comment-form, .add-reaction, #labels-edit")


def test_a_held_merge_names_its_reason_and_goes_through_after_a_line_review(
    server, browser, tmp_path
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    keeper = sign_up(server, "keeper")
    writer = sign_up(server, "writer")
    create(server, keeper, "/api/repositories", {"name": "vault"})
    status, _ = server.request(
        "PUT",
        "/api/repositories/keeper/vault/collaborators/writer",
        {"permission": "write"},
        keeper,
    )
    assert status in (200, 201, 204)
    run = push(server, "keeper", "vault", {"notes.txt": "one\ntwo\nthree\n"}, tmp_path / "w")
    # The owner is held too: enforceAdmins.
    rule = {
        "requiredPullRequestReviews": {"requiredApprovingReviewCount": 1},
        "enforceAdmins": True,
    }
    status, answer = server.request(
        "PUT", "/api/repositories/keeper/vault/branches/main/protection", rule, keeper
    )
    assert status == 200, answer
    run("checkout", "-qb", "feature")
    (tmp_path / "w" / "notes.txt").write_text("one\nTWO\nthree\n")
    run("commit", "-qam", "louder")
    host = server.url.replace("http://", f"http://writer:{PASSWORD.replace(' ', '%20')}@")
    run("push", "-q", f"{host}/keeper/vault.git", "feature")
    # A public repository reads without an account: its page, its clone box, no forms.
    browser.get(server.url + "/keeper/vault")
    wait_for(browser, "#clone-url")
    assert browser.find_element(By.ID, "sign-in-link").is_displayed()
    assert not browser.find_elements(By.ID, "repo-new-issue")
    sign_in(browser, server, "keeper")
    assert not browser.find_element(By.ID, "inbox-count").is_displayed()
    create(
        server,
        writer,
        "/api/repositories/keeper/vault/pulls",
        {"title": "Louder two", "head": "feature", "body": "Makes **two** louder"},
    )
    # The owner follows their repository: a thread, and the header's count goes up live.
    wait_text(browser, "#inbox-count", "1")
    create(
        server,
        writer,
        "/api/repositories/keeper/vault/pulls/1/requested_reviewers",
        {"reviewers": ["keeper"]},
    )
    browser.find_element(By.ID, "nav-inbox").click()
    wait_text(browser, "#inbox", "review requested")
    assert "keeper/vault #1 Louder two" in browser.find_element(By.ID, "inbox").text
    shoot(browser, "inbox")
    # Opening the thread reads it: the count goes down, live.
    browser.find_element(By.CSS_SELECTOR, "#inbox .thread-link").click()
    wait_text(browser, "#merge-problems", "approvals 0 of 1")
    WebDriverWait(browser, 10).until(
        lambda b: not b.find_element(By.ID, "inbox-count").is_displayed()
    )
    assert browser.find_element(By.ID, "requested-list").text == "● keeper"
    assert browser.find_element(By.ID, "merge").get_attribute("disabled") is not None
    # A comment on the changed line 2 (the head's side), then the approval.
    row = wait_for(browser, ".dl.add[data-line='2'][data-side='RIGHT']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
    row.find_element(By.CSS_SELECTOR, ".add-comment").click()
    fill(browser, ".line-form textarea", "Is **TWO** too loud?")
    browser.find_element(By.CSS_SELECTOR, ".line-form .add-line-comment").click()
    wait_text(browser, "#pending-count", "1 pending comment")
    fill(browser, "#review-body", "Fine once it ships")
    browser.find_element(By.ID, "verdict-approve").click()
    shoot(browser, "pull-review", bottom="#review-form")
    browser.find_element(By.ID, "submit-review").click()
    wait_text(browser, "#timeline", "approved these changes")
    wait_text(browser, "#sidebar", "No one asked")  # the review answered the request
    wait_text(browser, "#timeline", "notes.txt:2")
    assert "Is TWO too loud?" in browser.find_element(By.ID, "timeline").text
    status, got = server.request("GET", "/api/repositories/keeper/vault/pulls/1/reviews", None)
    [review] = got["reviews"]
    assert review["state"] == "APPROVED"
    assert [(c["path"], c["line"], c["side"]) for c in review["comments"]] == [
        ("notes.txt", 2, "RIGHT")
    ]
    # The approval met the rule: nothing holds the merge now.
    wait_text(browser, "#merge-box", "Ready to merge")
    browser.execute_script("window.scrollTo(0, 0)")
    shoot(browser, "pull-ready")
    Select(browser.find_element(By.ID, "merge-method")).select_by_value("squash")
    browser.find_element(By.ID, "merge").click()
    wait_text(browser, "#merge-box", "merged this into main")
    wait_text(browser, "#state", "merged")
    status, got = server.request("GET", "/api/repositories/keeper/vault/pulls/1", None)
    assert got["pullRequest"]["merged"] is True
    # The review's line comment, rendered, stays under its line.
    note = browser.find_element(
        By.CSS_SELECTOR, ".dl[data-line='2'][data-side='RIGHT'] + .line-note"
    )
    assert note.find_element(By.TAG_NAME, "strong").text.startswith("keeper")
    assert not browser.find_elements(By.CSS_SELECTOR, ".add-comment, #review-form")
    browser.execute_script("window.scrollTo(0, 0)")
    shoot(browser, "pull-merged")
    no_script_ran(browser)
