// Command image builds the OCI image of intd and intcollector without
// pulling anything: the static binaries (make binaries) on an empty base,
// one image per platform under one image index, written as an OCI image
// layout in a tar file (what skopeo and podman call an oci-archive).
//
//	go run ./deploy/image -o dist/intd_image.tar -platform linux/amd64=dist/linux_amd64 [-platform ...]
//
// The image holds /usr/bin/intd, /usr/bin/intcollector, their licence
// texts in /usr/share/doc/intd, /etc/passwd and /etc/group naming the
// unprivileged user intd (65532:65532) the image runs as, the state
// directory /var/lib/intd (0700, owned by it) and an empty /etc/intd for a
// mounted startup configuration. The entrypoint is intd, the default
// argument "run". Files carry the commit's time so that the same commit
// gives the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// UID and GID the image runs as: not root, and numeric so that Kubernetes'
// runAsNonRoot can check it without reading /etc/passwd.
const (
	uid = 65532
	gid = 65532
)

type platforms []platform

type platform struct {
	os, arch, variant, dir string
}

func (p *platforms) String() string { return fmt.Sprint(*p) }

func (p *platforms) Set(s string) error {
	spec, dir, ok := strings.Cut(s, "=")
	if !ok || dir == "" {
		return fmt.Errorf("want OS/ARCH[/VARIANT]=DIR, got %q", s)
	}
	parts := strings.Split(spec, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("want OS/ARCH[/VARIANT]=DIR, got %q", s)
	}
	pl := platform{os: parts[0], arch: parts[1], dir: dir}
	if len(parts) == 3 {
		pl.variant = parts[2]
	}
	*p = append(*p, pl)
	return nil
}

type options struct {
	out, version, revision, created, docs string
	platforms                             platforms
}

func main() {
	var o options
	flag.StringVar(&o.out, "o", "", "output file: an OCI image layout in a tar")
	flag.Var(&o.platforms, "platform", "OS/ARCH[/VARIANT]=DIR: DIR holds that platform's intd and intcollector (repeatable)")
	flag.StringVar(&o.version, "version", "", "version (image annotation and the layout's reference name)")
	flag.StringVar(&o.revision, "revision", "", "source commit (image annotation)")
	flag.StringVar(&o.created, "created", "", "creation time, RFC 3339 (default: the Unix epoch, for reproducible digests)")
	flag.StringVar(&o.docs, "docs", ".", "directory holding LICENSE and NOTICE")
	flag.Parse()
	if err := build(&o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(o *options) error {
	if o.out == "" || len(o.platforms) == 0 {
		return errors.New("-o and at least one -platform are required")
	}
	created := time.Unix(0, 0).UTC()
	if o.created != "" {
		t, err := time.Parse(time.RFC3339, o.created)
		if err != nil {
			return fmt.Errorf("-created: %w", err)
		}
		created = t.UTC()
	}
	anns := map[string]string{
		"org.opencontainers.image.title":       "intd",
		"org.opencontainers.image.description": "In-band Network Telemetry node (intd) and collector (intcollector), managed over gNMI",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	if o.version != "" {
		anns["org.opencontainers.image.version"] = o.version
	}
	if o.revision != "" {
		anns["org.opencontainers.image.revision"] = o.revision
	}

	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range o.platforms {
		img, err := platformImage(o, p, created, anns)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", p.os, p.arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: p.os, Architecture: p.arch, Variant: p.variant},
			},
		})
	}
	idx = mutate.Annotations(idx, anns).(v1.ImageIndex)

	dir, err := os.MkdirTemp("", "intd-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var refAnn []layout.Option
	if o.version != "" {
		refAnn = append(refAnn, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.version}))
	}
	if err := lp.AppendIndex(idx, refAnn...); err != nil {
		return fmt.Errorf("writing the image layout: %w", err)
	}
	return tarDir(dir, o.out, created)
}

// platformImage is one platform's image: a single layer on nothing.
func platformImage(o *options, p platform, created time.Time, anns map[string]string) (v1.Image, error) {
	layerTar, err := rootFS(o, p, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{
		Architecture: p.arch,
		OS:           p.os,
		Variant:      p.variant,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{"/usr/bin/intd"},
			Cmd:        []string{"run"},
			User:       fmt.Sprintf("%d:%d", uid, gid),
			WorkingDir: "/",
			Env:        []string{"PATH=/usr/bin"},
			Labels:     anns,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "deploy/image: intd and intcollector, static", Comment: o.version},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Annotations(img, anns).(v1.Image), nil
}

// rootFS is the layer's tar: directories, then files, in a fixed order.
func rootFS(o *options, p platform, created time.Time) ([]byte, error) {
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte // nil for a directory
	}
	var files []entry
	for _, name := range []string{"intd", "intcollector"} {
		b, err := os.ReadFile(filepath.Join(p.dir, name))
		if err != nil {
			return nil, err
		}
		files = append(files, entry{name: "usr/bin/" + name, mode: 0o755, data: b})
	}
	for _, name := range []string{"LICENSE", "NOTICE"} {
		b, err := os.ReadFile(filepath.Join(o.docs, name))
		if err != nil {
			return nil, err
		}
		files = append(files, entry{name: "usr/share/doc/intd/" + name, mode: 0o644, data: b})
	}
	files = append(files,
		entry{name: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/usr/sbin/nologin\nintd:x:%d:%d:intd:/var/lib/intd:/usr/sbin/nologin\n", uid, gid)},
		entry{name: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nintd:x:%d:\n", gid)},
	)
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/intd/", mode: 0o755},
		{name: "usr/", mode: 0o755},
		{name: "usr/bin/", mode: 0o755},
		{name: "usr/share/", mode: 0o755},
		{name: "usr/share/doc/", mode: 0o755},
		{name: "usr/share/doc/intd/", mode: 0o755},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		{name: "var/lib/intd/", mode: 0o700, uid: uid, gid: gid},
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	entries = append(entries, files...)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created, Format: tar.FormatPAX}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the layout directory as a tar, in name order with fixed
// times and owners, so that the file is reproducible too.
func tarDir(dir, out string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, path := range names {
		fi, err := os.Lstat(path)
		if err != nil {
			f.Close()
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if !fi.IsDir() {
			src, err := os.Open(path)
			if err != nil {
				f.Close()
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
