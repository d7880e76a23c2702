"""When access to an organization's private repository ends, so do the person's private
forks of it (as GitHub deletes them): rows, git folder and subscriptions, as a delete."""

from __future__ import annotations

from aiohttp import web

from ..git.files import REPO_FILES
from ..keys import STORE
from ..notify.hub import HUB

# The note of the removal: the removal answers 204 as every delete does, and names here
# the forks it deleted, so whoever removed the access hears what went with it.
DELETED_FORKS_HEADER = "X-Hubsvc-Deleted-Forks"


async def delete_lost_forks(app: web.Application, org_id: int, user_id: int) -> list[str]:
    """Delete user_id's private forks of org_id's private repositories they may no longer
    read (none when org_id is a person); their owner/name."""
    store, files, hub = app[STORE], app[REPO_FILES], app[HUB]
    deleted = []
    for fork in await store.repos.lost_forks(org_id, user_id):
        # The same steps as DELETE /api/repositories/:owner/:name.
        await store.repos.delete(fork["id"])
        await files.remove(fork["id"])
        repository = {"owner": fork["owner_username"], "name": fork["name"]}
        await hub.recheck(fork["id"], repository)
        deleted.append(f"{fork['owner_username']}/{fork['name']}")
    return deleted


def noted(response: web.Response, deleted: list[str]) -> web.Response:
    """The removal's answer, naming the forks that went with the access."""
    if deleted:
        response.headers[DELETED_FORKS_HEADER] = ", ".join(deleted)
    return response
