package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
)

// ConfigAPI reads and writes the tier config and the merchant config with
// validation, so nobody edits Redis by hand (the predecessor's merchant
// config had no writer at all). Mounted on the admin listener.
type ConfigAPI struct {
	Alloc *allocator.Allocator
	Log   *slog.Logger
	// OnTierChange is called with a tier config just stored, so this
	// replica applies it at once (the others refresh periodically). Nil:
	// nothing.
	OnTierChange func(allocator.TierConfig)
	// OnMerchantChange is called once a merchant's config or pool target
	// is stored or deleted, so this replica's copy of the merchant state
	// (written back should Redis lose its data) has it at once. Nil:
	// nothing.
	OnMerchantChange func(context.Context)
}

// merchantChanged tells OnMerchantChange, if set.
func (c *ConfigAPI) merchantChanged(r *http.Request) {
	if c.OnMerchantChange != nil {
		c.OnMerchantChange(r.Context())
	}
}

// configBodyLimit bounds a config body; a tier config is a few KiB.
const configBodyLimit = 1 << 20

func (c *ConfigAPI) getTiers(w http.ResponseWriter, r *http.Request) {
	tc, err := c.Alloc.LoadTierConfig(r.Context())
	if err != nil {
		if errors.Is(err, allocator.ErrInvalidConfig) {
			// What Redis holds is broken: say so, and what is in effect.
			writeJSON(w, http.StatusConflict, map[string]any{"success": false, "code": "invalid_stored_config",
				"error": err.Error(), "in_effect": c.Alloc.Config().Tiers})
			return
		}
		writeError(w, r, c.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, tc)
}

// putTiers takes any of the three shapes ParseTierConfig reads and stores
// the envelope.
func (c *ConfigAPI) putTiers(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, configBodyLimit))
	if err != nil {
		writeError(w, r, c.Log, fmt.Errorf("%w: %v", calls.ErrBadRequest, err))
		return
	}
	tc, err := allocator.ParseTierConfig(body)
	if err == nil {
		err = tc.Validate()
	}
	if err == nil {
		err = c.Alloc.StoreTierConfig(r.Context(), tc)
	}
	if err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	if c.OnTierChange != nil {
		c.OnTierChange(tc)
	}
	c.Log.Info("tier config stored through the admin API", "chain", tc.DefaultChain)
	writeJSON(w, http.StatusOK, tc)
}

func (c *ConfigAPI) listMerchants(w http.ResponseWriter, r *http.Request) {
	good, bad, err := c.Alloc.MerchantConfigs(r.Context())
	if err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"merchants": good, "invalid": bad})
}

func (c *ConfigAPI) getMerchant(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	good, bad, err := c.Alloc.MerchantConfigs(r.Context())
	if err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	if mc, ok := good[id]; ok {
		writeJSON(w, http.StatusOK, mc)
		return
	}
	if msg, ok := bad[id]; ok {
		writeJSON(w, http.StatusConflict, map[string]any{"success": false, "code": "invalid_stored_config", "error": msg})
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"success": false, "code": "merchant_not_found", "error": "no config for merchant " + id})
}

func (c *ConfigAPI) putMerchant(w http.ResponseWriter, r *http.Request) {
	var mc allocator.MerchantConfig
	if err := decodeStrict(w, r, &mc); err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	if err := c.Alloc.SetMerchantConfig(r.Context(), r.PathValue("id"), mc); err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	c.merchantChanged(r)
	writeJSON(w, http.StatusOK, mc)
}

func (c *ConfigAPI) deleteMerchant(w http.ResponseWriter, r *http.Request) {
	found, err := c.Alloc.DeleteMerchantConfig(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	c.merchantChanged(r)
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "deleted": found})
}

func (c *ConfigAPI) listPools(w http.ResponseWriter, r *http.Request) {
	targets, err := c.Alloc.MerchantTargets(r.Context())
	if err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"targets": targets})
}

// putPool sets a merchant pool's target ({"target": n}; 0 removes it):
// tier assignment fills merchant pools first, up to their targets.
func (c *ConfigAPI) putPool(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Target *int `json:"target"`
	}
	if err := decodeStrict(w, r, &body); err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	if body.Target == nil {
		writeError(w, r, c.Log, fmt.Errorf("%w: target is required", calls.ErrBadRequest))
		return
	}
	if err := c.Alloc.SetMerchantTarget(r.Context(), r.PathValue("pool"), *body.Target); err != nil {
		writeError(w, r, c.Log, err)
		return
	}
	c.merchantChanged(r)
	writeJSON(w, http.StatusOK, map[string]any{"pool": r.PathValue("pool"), "target": *body.Target})
}

// decodeStrict decodes one JSON object refusing unknown fields: a typo in a
// config key must fail, not silently write a config without it.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, configBodyLimit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", calls.ErrBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON body", calls.ErrBadRequest)
	}
	return nil
}
