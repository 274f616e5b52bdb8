"""runtime.images in BoxLite 0.10's shape: list (ImageInfo), get
(ImageDetail of ImageVersions), remove, pull (ImagePullResult), on a fresh
home of their own; no box boots."""

from __future__ import annotations

import asyncio

import pytest

import boxlite
from conftest import IMAGE_TARS


@pytest.mark.local_only("images.load and images.remove need a local store")
def test_image_catalog(tmp_path):
    tar = IMAGE_TARS["alpine:latest"]
    if not tar.is_file():
        pytest.fail(f"{tar} does not exist yet (build it with `make images`)")

    async def go():
        rt = boxlite.Boxlite(boxlite.Options(home_dir=str(tmp_path / "home")))
        try:
            loaded = await rt.images.load(str(tar))
            assert [i.reference for i in loaded] == ["docker.io/library/alpine:latest"], loaded
            [info] = await rt.images.list()
            assert isinstance(info, boxlite.ImageInfo)
            assert (info.repository, info.tag) == ("docker.io/library/alpine", "latest")
            assert info.id == info.digest and info.id.startswith("sha256:")
            assert info.size_bytes == info.size > 0 and info.cached_at.endswith("Z"), info
            detail = await rt.images.get("alpine")
            assert isinstance(detail, boxlite.ImageDetail)
            assert (detail.name, detail.tags, detail.curated) == ("docker.io/library/alpine", ["latest"], False)
            [v] = detail.versions
            assert isinstance(v, boxlite.ImageVersion)
            assert (v.digest, v.source_ref, v.recorded_at) == (info.digest, info.reference, info.cached_at)
            with pytest.raises(boxlite.NotFoundError):
                await rt.images.get("busybox")
            # No registry answers here: unreachable (also BoxLite's ImageError and NetworkError).
            with pytest.raises(boxlite.ImageError) as e:
                await rt.images.pull("127.0.0.1:9/nope:1")
            assert isinstance(e.value, boxlite.UnreachableError) and isinstance(e.value, boxlite.NetworkError)
            await rt.images.remove("alpine")
            assert await rt.images.list() == []
            with pytest.raises(boxlite.NotFoundError):
                await rt.images.remove("alpine")
            with pytest.raises(TypeError):
                await rt.images.get(5)
        finally:
            await rt.shutdown()

    asyncio.run(go())


def test_pull_result_shape():
    r = boxlite.ImagePullResult(reference="docker.io/library/alpine:latest", config_digest="sha256:x", layer_count=1)
    assert (r.reference, r.config_digest, r.layer_count) == ("docker.io/library/alpine:latest", "sha256:x", 1)
