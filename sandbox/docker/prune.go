package docker

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

// PruneOptions say which labelled objects are leftovers.
type PruneOptions struct {
	// SnapshotAttempt classifies the attempt of a snapshot image: known
	// reports whether the attempt is in this store, current whether it is
	// its address's current attempt. Snapshots of known, no longer current
	// attempts are removed; others are kept (another store may own them).
	// Nil keeps every snapshot.
	SnapshotAttempt func(attemptID string) (known, current bool)
	// Snapshot, when set, decides each snapshot image instead of
	// SnapshotAttempt: remove it or keep it, and why.
	Snapshot func(SnapshotImage) (remove bool, reason string)
	// DryRun lists what would be removed without removing it.
	DryRun bool
}

// SnapshotImage is a labelled snapshot image, as Prune asks about it.
type SnapshotImage struct {
	ID      string // sha256:<hex>, as Instance.Snapshot returned it
	Attempt string
	Address string
	Store   string // the absolute store folder it was labelled with; "" for older snapshots
	Lineage string
}

// Pruned is one object Prune removed (or would remove, or kept).
type Pruned struct {
	Kind    string `json:"kind"` // container | image | volume | network
	ID      string `json:"id"`
	Attempt string `json:"attempt,omitempty"`
	Address string `json:"address,omitempty"`
	Role    string `json:"role,omitempty"`
	Reason  string `json:"reason"`
	Error   string `json:"error,omitempty"`
}

// PruneReport lists what Prune removed and what it left alone, and why.
type PruneReport struct {
	Removed []Pruned `json:"removed"`
	Kept    []Pruned `json:"kept,omitempty"`
}

// Prune removes what a killed hemra left behind, and only objects that
// carry hemra's label: containers whose hemra process is gone, snapshot
// images of attempts that are no longer current in this store, and
// labelled volumes and networks that no container uses. Containers of a
// hemra that is still running (an apply in progress) are left alone.
func (p *Provider) Prune(ctx context.Context, opts PruneOptions) (*PruneReport, error) {
	rep := &PruneReport{}
	managed := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))

	ctrs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: managed})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	for _, c := range ctrs {
		item := Pruned{Kind: "container", ID: short(c.ID), Attempt: c.Labels[LabelAttempt], Address: c.Labels[LabelAddress], Role: c.Labels[LabelRole]}
		if alive, why := p.creatorAlive(c.Labels); alive {
			item.Reason = why
			rep.Kept = append(rep.Kept, item)
			continue
		}
		item.Reason = "its hemra process is gone"
		if !opts.DryRun {
			err := p.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !client.IsErrNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
				item.Error = err.Error()
			}
		}
		rep.Removed = append(rep.Removed, item)
	}

	imgs, err := p.cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", LabelRole+"="+RoleSnapshot))})
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	var doomed []string // image ids to remove, in the order of their rep.Removed items
	for _, im := range imgs {
		item := Pruned{Kind: "image", ID: short(im.ID), Attempt: im.Labels[LabelAttempt], Address: im.Labels[LabelAddress], Role: RoleSnapshot}
		if opts.Snapshot != nil {
			remove, reason := opts.Snapshot(SnapshotImage{ID: im.ID, Attempt: item.Attempt, Address: item.Address,
				Store: im.Labels[LabelStore], Lineage: im.Labels[LabelLineage]})
			item.Reason = reason
			if !remove {
				rep.Kept = append(rep.Kept, item)
				continue
			}
			doomed = append(doomed, im.ID)
			rep.Removed = append(rep.Removed, item)
			continue
		}
		known, current := false, false
		if opts.SnapshotAttempt != nil {
			known, current = opts.SnapshotAttempt(item.Attempt)
		}
		switch {
		case current:
			item.Reason = "snapshot of a current attempt (a later re-verify reuses it)"
			rep.Kept = append(rep.Kept, item)
			continue
		case !known:
			item.Reason = "snapshot of an attempt this store does not know"
			rep.Kept = append(rep.Kept, item)
			continue
		}
		item.Reason = "snapshot of an attempt that is no longer current"
		doomed = append(doomed, im.ID)
		rep.Removed = append(rep.Removed, item)
	}
	if !opts.DryRun {
		// Children before the parents they were committed from.
		first := len(rep.Removed) - len(doomed)
		for i, err := range removeImages(ctx, p.cli, doomed) {
			if err != nil {
				rep.Removed[first+i].Error = err.Error()
			}
		}
	}

	vols, err := p.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelManaged+"=true"), filters.Arg("dangling", "true"))})
	if err == nil {
		for _, v := range vols.Volumes {
			item := Pruned{Kind: "volume", ID: short(v.Name), Attempt: v.Labels[LabelAttempt], Address: v.Labels[LabelAddress], Role: v.Labels[LabelRole], Reason: "no container uses it"}
			if !opts.DryRun {
				if err := p.cli.VolumeRemove(ctx, v.Name, true); err != nil {
					item.Error = err.Error()
				}
			}
			rep.Removed = append(rep.Removed, item)
		}
	}

	nets, err := p.cli.NetworkList(ctx, network.ListOptions{Filters: managed})
	if err == nil {
		for _, n := range nets {
			item := Pruned{Kind: "network", ID: short(n.ID), Attempt: n.Labels[LabelAttempt], Address: n.Labels[LabelAddress], Role: n.Labels[LabelRole]}
			insp, err := p.cli.NetworkInspect(ctx, n.ID, network.InspectOptions{})
			if err == nil && len(insp.Containers) > 0 {
				item.Reason = "containers still use it"
				rep.Kept = append(rep.Kept, item)
				continue
			}
			item.Reason = "no container uses it"
			if !opts.DryRun {
				if err := p.cli.NetworkRemove(ctx, n.ID); err != nil {
					item.Error = err.Error()
				}
			}
			rep.Removed = append(rep.Removed, item)
		}
	}
	sortPruned(rep.Removed)
	sortPruned(rep.Kept)
	return rep, nil
}

// creatorAlive reports whether the hemra that created a container still
// runs: same host and its pid answers. Containers from another host are
// left alone, as hemra cannot tell.
func (p *Provider) creatorAlive(l map[string]string) (bool, string) {
	host, pidStr := l[LabelHost], l[LabelPID]
	if host != "" && host != p.host {
		return true, fmt.Sprintf("created by hemra on host %s, which this hemra cannot check", host)
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return false, ""
	}
	if pid == os.Getpid() {
		return true, "created by this hemra"
	}
	if err := syscall.Kill(pid, 0); err == nil || err == syscall.EPERM {
		return true, fmt.Sprintf("its hemra (pid %d) is still running", pid)
	}
	return false, ""
}

func short(id string) string {
	if len(id) > 7 && id[:7] == "sha256:" {
		id = id[7:]
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func sortPruned(s []Pruned) {
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Kind != s[j].Kind {
			return s[i].Kind < s[j].Kind
		}
		return s[i].ID < s[j].ID
	})
}

// RemoveStore removes every container and snapshot image labelled as
// belonging to the store folder store, or to any store under it (tests
// pass their temporary folder): what `hemra harness check` leaves in its
// throwaway store, or a test run leaves behind. Objects without a store
// label, task images included, are never touched.
func (p *Provider) RemoveStore(ctx context.Context, store string) ([]Pruned, error) {
	return RemoveStoreObjects(ctx, p.cli, store)
}

// RemoveStoreObjects is Provider.RemoveStore on an engine client.
func RemoveStoreObjects(ctx context.Context, cli client.APIClient, store string) ([]Pruned, error) {
	if store == "" || !strings.HasPrefix(store, "/") {
		return nil, fmt.Errorf("store folder %q is not an absolute path", store)
	}
	store = strings.TrimSuffix(store, "/")
	under := func(l map[string]string) bool {
		s := l[LabelStore]
		return s == store || strings.HasPrefix(s, store+"/")
	}
	var removed []Pruned
	var errs []string
	ctrs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", LabelStore))})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	for _, c := range ctrs {
		if !under(c.Labels) {
			continue
		}
		item := Pruned{Kind: "container", ID: short(c.ID), Attempt: c.Labels[LabelAttempt], Address: c.Labels[LabelAddress], Role: c.Labels[LabelRole], Reason: "its store is being removed"}
		err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !client.IsErrNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
			item.Error = err.Error()
			errs = append(errs, err.Error())
		}
		removed = append(removed, item)
	}
	imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", LabelRole+"="+RoleSnapshot), filters.Arg("label", LabelStore))})
	if err != nil {
		return removed, fmt.Errorf("listing images: %w", err)
	}
	var ids []string
	var items []Pruned
	for _, im := range imgs {
		if !under(im.Labels) {
			continue
		}
		ids = append(ids, im.ID)
		items = append(items, Pruned{Kind: "image", ID: short(im.ID), Attempt: im.Labels[LabelAttempt], Address: im.Labels[LabelAddress], Role: RoleSnapshot, Reason: "its store is being removed"})
	}
	for i, err := range removeImages(ctx, cli, ids) {
		if err != nil {
			items[i].Error = err.Error()
			errs = append(errs, err.Error())
		}
	}
	removed = append(removed, items...)
	sortPruned(removed)
	if len(errs) > 0 {
		return removed, fmt.Errorf("removing the objects of store %s: %s", store, strings.Join(errs, "; "))
	}
	return removed, nil
}

// removeImages removes images, children before the parents they were
// committed from (a read-only container's snapshot is two commits, and
// the engine refuses to remove a parent first): an image refused for its
// children is tried again once the others are gone, a few rounds at most.
// A missing image counts as removed. It returns one error (or nil) per id.
func removeImages(ctx context.Context, cli client.APIClient, ids []string) []error {
	errs := make([]error, len(ids))
	pending := make([]int, len(ids))
	for i := range ids {
		pending[i] = i
	}
	for round := 0; round < 4 && len(pending) > 0; round++ {
		var again []int
		for _, i := range pending {
			_, err := cli.ImageRemove(ctx, ids[i], image.RemoveOptions{Force: true, PruneChildren: true})
			switch {
			case err == nil || client.IsErrNotFound(err) || strings.Contains(err.Error(), "unrecognized image ID"):
				// The engine says "unrecognized image ID" for a parent
				// commit its child's removal pruned already.
				errs[i] = nil
			case strings.Contains(err.Error(), "child"):
				errs[i] = err
				again = append(again, i)
			default:
				errs[i] = err
			}
		}
		pending = again
	}
	return errs
}
