package restapi

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

func imageInfo(img boxlite.Image) wire.ImageInfo {
	repo, tag := img.Name, ""
	if i := strings.LastIndex(img.Name, ":"); i > strings.LastIndex(img.Name, "/") {
		repo, tag = img.Name[:i], img.Name[i+1:]
	}
	size := img.Size
	in := wire.ImageInfo{Reference: img.Name, Repository: repo, Tag: tag, ID: img.Digest, SizeBytes: &size}
	if !img.CachedAt.IsZero() {
		in.CachedAt = img.CachedAt.UTC().Format(time.RFC3339Nano)
	}
	return in
}

func (a *API) listImages(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "pageSize", "pageToken")
	if err != nil {
		return err
	}
	imgs, err := a.rt.Images().List()
	if err != nil {
		return err
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Name < imgs[j].Name })
	out := make([]wire.ImageInfo, 0, len(imgs))
	for _, img := range imgs {
		if img.Name != "" {
			out = append(out, imageInfo(img))
		}
	}
	page, next, err := paginate(len(out), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ListImagesResponse{Images: out[page[0]:page[1]], NextPageToken: next})
	return nil
}

func (a *API) getImage(w http.ResponseWriter, r *http.Request) error {
	img, err := a.rt.Images().Get(r.PathValue("image_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, imageInfo(img))
	return nil
}

func (a *API) headImage(w http.ResponseWriter, r *http.Request) error {
	if _, err := a.rt.Images().Get(r.PathValue("image_id")); err != nil {
		w.WriteHeader(answerFor(err).Status)
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) pullImage(w http.ResponseWriter, r *http.Request) error {
	var req wire.PullImageRequest
	if err := a.decode(r, &req, false); err != nil {
		return err
	}
	if req.Reference == "" || len(req.Reference) > 512 {
		return errdefs.Errorf(errdefs.ErrInvalidArgument, "reference is required (at most 512 bytes)")
	}
	res, err := a.pull(r.Context(), req.Reference)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, imageInfo(res.Image))
	return nil
}

// pull pulls ref; a registry's failure is BoxLite's 422 image_pull_failed.
func (a *API) pull(ctx context.Context, ref string) (boxlite.PullResult, error) {
	res, err := a.rt.Pull(ctx, ref)
	if err != nil {
		if k := errdefs.KindOf(err); k == errdefs.KindInvalidArgument || k == errdefs.KindTimeout {
			return res, err
		}
		return res, newError(errImagePull, "%v", err)
	}
	return res, nil
}

// ensureImage pulls a create's image unless the store has it, so that a
// registry's failure answers as a pull's.
func (a *API) ensureImage(ctx context.Context, ref string) error {
	if _, err := a.rt.Images().Get(ref); err == nil {
		return nil
	}
	_, err := a.pull(ctx, ref)
	return err
}

func (a *API) runtimeMetrics(w http.ResponseWriter, r *http.Request) error {
	m := a.rt.Metrics()
	writeJSON(w, http.StatusOK, wire.RuntimeMetrics{
		BoxesCreatedTotal: m.BoxesCreatedTotal, BoxesFailedTotal: m.BoxesFailedTotal,
		NumRunningBoxes: m.NumRunningBoxes, TotalCommandsExecuted: m.TotalCommandsExecuted, TotalExecErrors: m.TotalExecErrors,
	})
	return nil
}

func (a *API) boxMetrics(w http.ResponseWriter, r *http.Request) error {
	b, err := a.getBox(r.Context(), r)
	if err != nil {
		return err
	}
	m, err := b.Metrics(r.Context())
	if err != nil {
		return err
	}
	ms := func(f *float64) *int64 {
		if f == nil {
			return nil
		}
		v := int64(*f)
		return &v
	}
	boot := m.GuestBootDurationMs
	writeJSON(w, http.StatusOK, wire.BoxMetrics{
		CommandsExecutedTotal: m.CommandsExecutedTotal, ExecErrorsTotal: m.ExecErrorsTotal,
		BytesSentTotal: m.BytesSentTotal, BytesReceivedTotal: m.BytesReceivedTotal,
		CPUPercent: m.CPUPercent, MemoryBytes: m.MemoryBytes,
		NetworkBytesSent: m.NetworkBytesSent, NetworkBytesReceived: m.NetworkBytesReceived,
		NetworkTCPConnections: m.NetworkTCPConnections,
		NetworkTCPErrors:      m.NetworkTCPErrors,
		BootTiming: &wire.BootTiming{
			TotalCreateMs: ms(m.TotalCreateDurationMs), GuestBootMs: ms(&boot),
			ImagePrepareMs: ms(m.StageImagePrepareMs), BoxConfigMs: ms(m.StageBoxConfigMs),
			BoxSpawnMs: ms(m.StageBoxSpawnMs), ContainerInitMs: ms(m.StageContainerInitMs),
		},
	})
	return nil
}
