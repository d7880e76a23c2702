"""Where links point: the pages of [server] web_url when set, else the API resources."""

from __future__ import annotations

from urllib.parse import quote


def _seg(value: object) -> str:
    return quote(str(value), safe="")


class SiteUrl(str):
    """The API's base URL, as a plain string, that also builds every link to a resource.

    A str, so every caller that passes config.base_url on (present, publish, the chat
    messages) gets the configured web_url with it without a new parameter. With web_url
    empty, links name the API resource (which answers 200); with it set (this server's
    own URL, whose dashboard answers these paths, or a front-end), the GitHub-shaped page.
    """

    web_url: str
    ssh_base: str  # "ssh://git@host:2222/" or "git@host:" (port 22); "" with SSH off

    def __new__(cls, base_url: str, web_url: str = "", ssh_base: str = "") -> SiteUrl:
        self = super().__new__(cls, base_url.rstrip("/"))
        self.web_url = web_url.rstrip("/")
        self.ssh_base = ssh_base
        return self

    @classmethod
    def of(cls, base_url: str) -> SiteUrl:
        """base_url itself when it is a SiteUrl; else one without web pages."""
        return base_url if isinstance(base_url, SiteUrl) else cls(base_url)

    def _repo_api(self, owner: str, name: str) -> str:
        return f"{self}/api/repositories/{_seg(owner)}/{_seg(name)}"

    def home(self) -> str:
        """The front page, or the API's documentation."""
        return self.web_url or f"{self}/api/docs"

    def user(self, username: str) -> str:
        """A user's profile."""
        if self.web_url:
            return f"{self.web_url}/{_seg(username)}"
        return f"{self}/api/users/{_seg(username)}"

    def repo(self, owner: str, name: str) -> str:
        """A repository."""
        if self.web_url:
            return f"{self.web_url}/{_seg(owner)}/{_seg(name)}"
        return self._repo_api(owner, name)

    def ssh_clone(self, owner: str, name: str) -> str | None:
        """A repository's clone URL over SSH, or None when the SSH port is off."""
        return f"{self.ssh_base}{owner}/{name}.git" if self.ssh_base else None

    def issue(self, owner: str, name: str, number: int, pull: bool = False) -> str:
        """An issue, or a pull request with pull=True."""
        kind = "pulls" if pull else "issues"
        if self.web_url:
            return f"{self.web_url}/{_seg(owner)}/{_seg(name)}/{kind}/{int(number)}"
        return f"{self._repo_api(owner, name)}/{kind}/{int(number)}"

    def commit(self, owner: str, name: str, oid: str) -> str:
        """One commit (its diff, from the API)."""
        if self.web_url:
            return f"{self.web_url}/{_seg(owner)}/{_seg(name)}/commit/{_seg(oid)}"
        return f"{self._repo_api(owner, name)}/commits/{_seg(oid)}/diff"

    def commits(self, owner: str, name: str, rev: str) -> str:
        """The history reachable from a branch, tag or commit."""
        if self.web_url:
            return f"{self.web_url}/{_seg(owner)}/{_seg(name)}/commits/{_seg(rev)}"
        return f"{self._repo_api(owner, name)}/commits?branch={_seg(rev)}"


def ssh_base(host: str, port: int) -> str:
    """What SSH clone URLs start with: scp-like on port 22, else an ssh:// URL."""
    bracketed = f"[{host}]" if ":" in host else host
    return f"git@{bracketed}:" if port == 22 else f"ssh://git@{bracketed}:{port}/"
