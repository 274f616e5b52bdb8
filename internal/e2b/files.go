package e2b

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
)

// maxUploadParts bounds the files of one multipart upload.
const maxUploadParts = 1000

// download is envd's GET /files?path=: the file's bytes.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r.Context())
	user, err := userOf(r.Header)
	if err == nil && r.URL.Query().Get("username") != "" {
		user = r.URL.Query().Get("username")
		if !userPattern.MatchString(user) {
			err = statusErr(http.StatusBadRequest, "username %q: not a user name", truncate(user))
		}
	}
	var p string
	if err == nil {
		p, err = resolve(r.URL.Query().Get("path"), user)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Hour)
	defer cancel()
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(sb.box.CopyOutArchive(ctx, p, pw, boxlite.CopyOptions{FollowSymlinks: true, MaxBytes: s.lim.TransferBytes, MaxEntries: 1 << 20}))
	}()
	defer pr.Close()
	tr := tar.NewReader(pr)
	h, err := tr.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = statusErr(http.StatusNotFound, "path %q does not exist", truncate(p))
		}
		writeError(w, err)
		return
	}
	if h.Typeflag != tar.TypeReg {
		writeError(w, statusErr(http.StatusBadRequest, "path %q is not a file", truncate(p)))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(h.Size, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	w.WriteHeader(http.StatusOK)
	io.Copy(w, tr) // a client that leaves only loses its copy
}

// writeInfo is envd's answer for one written file.
type writeInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// upload is envd's POST /files: an octet-stream body to ?path=, or a
// multipart form of files named by their paths.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if err := s.uploadFiles(w, r); err != nil {
		writeError(w, err)
	}
}

func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request) error {
	sb := sandboxOf(r.Context())
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-metadata-") {
			return notServed("file metadata")
		}
	}
	user, err := userOf(r.Header)
	if err != nil {
		return err
	}
	if u := r.URL.Query().Get("username"); u != "" {
		if !userPattern.MatchString(u) {
			return statusErr(http.StatusBadRequest, "username %q: not a user name", truncate(u))
		}
		user = u
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, s.lim.TransferBytes+1<<20)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return statusErr(http.StatusBadRequest, "gzip body: %v", err)
		}
		body = zr
	default:
		return statusErr(http.StatusUnsupportedMediaType, "Content-Encoding %q: want gzip or none", truncate(enc))
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		mt = "application/octet-stream"
	}
	var out []writeInfo
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(body, params["boundary"])
		for n := 0; ; n++ {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return statusErr(http.StatusBadRequest, "multipart body: %v", err)
			}
			if n >= maxUploadParts {
				return statusErr(http.StatusBadRequest, "more than %d files", maxUploadParts)
			}
			// E2B names each part by its path; Part.FileName keeps only the base.
			name := ""
			if _, ps, err := mime.ParseMediaType(part.Header.Get("Content-Disposition")); err == nil {
				name = ps["filename"]
			}
			if q := r.URL.Query().Get("path"); q != "" && n == 0 {
				name = q
			}
			wi, err := s.writeFile(r.Context(), sb, user, name, part)
			if err != nil {
				return err
			}
			out = append(out, wi)
		}
		if len(out) == 0 {
			return statusErr(http.StatusBadRequest, "the form holds no file")
		}
	default:
		wi, err := s.writeFile(r.Context(), sb, user, r.URL.Query().Get("path"), body)
		if err != nil {
			return err
		}
		out = append(out, wi)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// writeFile spools one file (bounded), then copies it into the box as a
// one-file archive, made the user's when the user is not root.
func (s *Server) writeFile(ctx context.Context, sb *sandbox, user, name string, r io.Reader) (writeInfo, error) {
	p, err := resolve(name, user)
	if err != nil {
		return writeInfo{}, err
	}
	if p == "/" {
		return writeInfo{}, statusErr(http.StatusBadRequest, "path / is a directory")
	}
	f, err := os.CreateTemp(s.tmp, "e2b-upload-*")
	if err != nil {
		return writeInfo{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(r, s.lim.TransferBytes+1))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return writeInfo{}, statusErr(http.StatusRequestEntityTooLarge, "upload over %d bytes", s.lim.TransferBytes)
		}
		return writeInfo{}, statusErr(http.StatusBadRequest, "reading the upload: %v", err)
	}
	if n > s.lim.TransferBytes {
		return writeInfo{}, statusErr(http.StatusRequestEntityTooLarge, "file over %d bytes", s.lim.TransferBytes)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return writeInfo{}, err
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: path.Base(p), Typeflag: tar.TypeReg, Mode: 0o644, Size: n, ModTime: time.Now()})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = sb.box.CopyInArchive(ctx, pr, p, boxlite.CopyOptions{ArchiveOneFile: true, MaxBytes: s.lim.TransferBytes, MaxEntries: 1})
	pr.CloseWithError(errors.New("copy ended"))
	if err != nil {
		return writeInfo{}, err
	}
	if user != "" && user != "root" && user != "0" {
		res, err := sb.box.Run(ctx, boxlite.Command{Argv: []string{"chown", "--", user, p}, Timeout: fsTimeout})
		if err != nil {
			return writeInfo{}, err
		}
		if res.Code != 0 {
			return writeInfo{}, statusErr(http.StatusBadRequest, "making %q %s's: %s", truncate(p), user, truncate(strings.TrimSpace(string(res.Stderr))))
		}
	}
	return writeInfo{Name: path.Base(p), Type: "file", Path: p}, nil
}
