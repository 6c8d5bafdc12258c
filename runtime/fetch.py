"""sparkc fetch-model: download a Hugging Face repo at a revision, on the head, inside the deployment's image
(which ships huggingface_hub), into a Hugging Face cache or into the weights' folder.

Arguments: REPO REVISION TARGET MODE (MODE: cache, TARGET the hub folder; folder, TARGET the weights'
folder). HF_TOKEN and HF_ENDPOINT come from the environment, as huggingface_hub reads them. The repo's size
is compared with the free space first; files already complete are skipped, so a second run continues
where the first stopped, and a dropped connection resumes its file with a Range request (huggingface_hub's
own retry). One line per file, then one line for the script:
    SPARKC_FETCH {"ok": true, "commit": "...", "files": 3, "bytes": 1234, ...}
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path


def report(**fields):
    print("SPARKC_FETCH " + json.dumps(fields, sort_keys=True), flush=True)


def fail(message, code=1):
    report(ok=False, error=message)
    sys.exit(code)


def present(target, mode, repo, item):
    """Bytes of this file already on disk: all of them when it is complete, a partial download's so far."""
    if mode == "folder":
        path = Path(target, item.path)
        return item.size if path.is_file() and path.stat().st_size == item.size else 0
    blob = item.lfs.sha256 if item.lfs is not None else item.blob_id
    path = Path(target, "models--" + repo.replace("/", "--"), "blobs", blob)
    if path.is_file() and path.stat().st_size == item.size:
        return item.size
    partial = path.with_name(blob + ".incomplete")
    return min(partial.stat().st_size, item.size) if partial.is_file() else 0


def hub():
    """huggingface_hub's download API and its errors, which live in huggingface_hub.errors since 0.23
    (before, in huggingface_hub.utils); an image without it cannot download."""
    try:
        import huggingface_hub
    except ImportError as exc:
        fail(f"this image has no huggingface_hub ({exc}): download the weights elsewhere, then distribute.sh", 3)
    try:
        from huggingface_hub import errors
    except ImportError:
        from huggingface_hub import utils as errors
    return huggingface_hub, errors


def listing(hf, errors, repo, revision):
    """The commit the revision names and the repo's files at it; a refusal of the hub as a message."""
    token_hint = "export HF_TOKEN (a token with read access to it) where fetch-model.sh runs"
    api = hf.HfApi()
    try:
        commit = api.repo_info(repo, revision=revision).sha
        files = [f for f in api.list_repo_tree(repo, revision=commit, recursive=True) if hasattr(f, "blob_id")]
    except errors.GatedRepoError:
        fail(f"{repo} is gated: accept its terms on the hub, then {token_hint}")
    except errors.RepositoryNotFoundError:
        fail(f"{repo} was not found, or is private: check model.repo, or {token_hint}")
    except errors.RevisionNotFoundError:
        fail(f"{repo} has no revision {revision}: check model.revision (a commit, branch or tag)")
    except errors.HfHubHTTPError as exc:
        fail(f"the hub refused {repo}: {str(exc).splitlines()[0]}")
    except OSError as exc:
        fail(f"cannot reach the hub ({os.environ.get('HF_ENDPOINT') or 'https://huggingface.co'}): {exc}")
    return commit, files


def main(argv):
    repo, revision, target, mode = argv[1:5]
    hf, errors = hub()
    commit, files = listing(hf, errors, repo, revision)
    total = sum(f.size for f in files)
    have = sum(present(target, mode, repo, f) for f in files)
    free = shutil.disk_usage(target).free
    gb = lambda n: f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"  # noqa: E731
    print(
        f"sparkc: {repo} at {revision} (commit {commit}): {len(files)} files, {gb(total)}; "
        f"{gb(have)} already here, {gb(free)} free in {target}",
        flush=True,
    )
    if total - have > free:
        fail(
            f"{repo} needs {gb(total - have)} more, but {target} has {gb(free)} free: free some space, "
            "or point model.path (or model.hf_cache) at a larger disk"
        )
    where = {"cache_dir": target} if mode == "cache" else {"local_dir": target}
    start, done = time.monotonic(), 0
    for i, item in enumerate(sorted(files, key=lambda f: f.path), 1):
        already = present(target, mode, repo, item)
        began = time.monotonic()
        try:
            # The spec's revision, not the commit: in a cache, huggingface_hub then records refs/<revision>,
            # which the launcher reads.
            hf.hf_hub_download(repo, item.path, revision=revision, **where)
        except (errors.HfHubHTTPError, OSError) as exc:
            fail(
                f"{item.path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; run fetch-model.sh "
                "again to resume"
            )
        done += item.size
        seconds = max(time.monotonic() - began, 1e-6)
        state = "already here" if already == item.size else f"{(item.size - already) / seconds / 1e6:.1f} MB/s"
        print(
            f"sparkc: [{i}/{len(files)}] {item.path}: {gb(item.size)} ({state}); {gb(done)} of {gb(total)}", flush=True
        )
    report(
        ok=True,
        repo=repo,
        revision=revision,
        commit=commit,
        files=len(files),
        bytes=total,
        seconds=round(time.monotonic() - start, 1),
    )


if __name__ == "__main__":
    main(sys.argv)
