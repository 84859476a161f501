package kubernetes

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"time"
)

// imageFile is one file of a one-layer image.
type imageFile struct {
	path string // in the image, without the leading /
	data []byte
	mode int64
}

// writeImageArchive writes a one-layer image FROM scratch, tagged ref, as a
// `docker save` archive at path: what `ctr images import` reads. The
// node's sandbox (pause) image is made this way, as Kubernetes makes its
// own: one static program, run as the image's entrypoint.
func writeImageArchive(path, ref string, entrypoint []string, user string, files []imageFile) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, f := range files {
		if err := lw.WriteHeader(&tar.Header{Name: f.path, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := lw.Write(f.data); err != nil {
			return err
		}
	}
	if err := lw.Close(); err != nil {
		return err
	}
	sum := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint, "User": user},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(sum[:])}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   "config.json",
		"RepoTags": []string{ref},
		"Layers":   []string{"layer.tar"},
	}})
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := tar.NewWriter(out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"config.json", config}, {"layer.tar", layer.Bytes()}, {"manifest.json", manifest}} {
		if err := w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			out.Close()
			return err
		}
		if _, err := w.Write(f.data); err != nil {
			out.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
