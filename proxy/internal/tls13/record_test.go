package tls13

import (
	"bytes"
	"testing"
)

// recordPair is a record layer whose reads open what its writes seal: both
// directions keyed from one secret.
func recordPair(t testing.TB, s *tlsSuite) *Records {
	secret := bytes.Repeat([]byte{7}, s.hash().Size())
	in, err1 := newKeys(s, secret, 0)
	out, err2 := newKeys(s, secret, 0)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return &Records{in: in, out: out}
}

// openSplit feeds wire to r in two reads cut at cut, as the loop does (a
// partial record carried in r.part, put in front of the next read), and
// returns the application data.
func openSplit(r *Records, wire []byte, cut int) ([]byte, error) {
	var plain []byte
	buf := make([]byte, 32<<10) // the loops' read buffer
	for _, chunk := range [][]byte{wire[:cut], wire[cut:]} {
		for len(chunk) > 0 {
			m := copy(buf, r.part)
			n := copy(buf[m:], chunk)
			chunk = chunk[n:]
			p, err := r.Open(buf[:m+n], 0)
			if err != nil {
				return plain, err
			}
			if p > m+n || len(r.part) > RecordHeaderLen+MaxCiphertext {
				return plain, errBadRecordMAC
			}
			plain = append(plain, buf[:p]...)
		}
	}
	return plain, nil
}

// FuzzTLSRecordOpen: the loop's record decoder takes any bytes from a
// client without panicking or holding more than one record, and what the
// record layer seals opens to the same bytes however the reads cut it,
// KeyUpdates included, behind a run of records without data (empty ones,
// KeyUpdates, user_canceled warnings), refused exactly when the run is
// longer than crypto/tls allows (MaxUselessRecords).
func FuzzTLSRecordOpen(f *testing.F) {
	r := recordPair(f, suiteAES128)
	f.Add(r.Seal(nil, RecordTypeData, []byte("hello")), uint16(3), uint8(0), uint8(0))
	f.Add(r.out.SealRecord(nil, RecordTypeHandshake, []byte{MsgKeyUpdate, 0, 0, 1, 1}), uint16(9), uint8(1), uint8(16))
	f.Add(r.AlertRecord(AlertCloseNotify), uint16(0), uint8(2), uint8(17))
	f.Add([]byte{RecordTypeData, 3, 3, 0xff, 0xff}, uint16(2), uint8(0), uint8(3))
	f.Add([]byte{}, uint16(1), uint8(1), uint8(15))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, suite, useless uint8) {
		s := []*tlsSuite{suiteAES128, suiteAES256, suiteChaCha}[int(suite)%3]
		c := int(cut) % (len(data) + 1)
		// Anything: no panic, no unbounded state.
		openSplit(recordPair(t, s), data, c)

		// A round trip: data sealed (with an owed KeyUpdate ahead of it
		// when suite is odd, and useless%24 records without data before
		// all) opens to data.
		r := recordPair(t, s)
		var wire []byte
		run := int(useless) % 24
		for i := range run {
			switch i % 3 {
			case 0:
				wire = r.out.SealRecord(wire, RecordTypeData, nil)
			case 1:
				wire = r.out.SealRecord(wire, RecordTypeHandshake, []byte{MsgKeyUpdate, 0, 0, 1, 0})
				r.out.Update()
			case 2:
				wire = r.out.SealRecord(wire, RecordTypeAlert, []byte{1, AlertUserCanceled})
			}
		}
		r.owedUpdate = suite%2 == 1
		if r.owedUpdate {
			run++
		}
		if len(data) == 0 {
			run++ // one empty record
		}
		wire = r.Seal(wire, RecordTypeData, data)
		got, err := openSplit(r, wire, int(cut)%(len(wire)+1))
		switch {
		case run > MaxUselessRecords && err == nil:
			t.Fatalf("%d records in a row without data accepted", run)
		case run <= MaxUselessRecords && (err != nil || !bytes.Equal(got, data)):
			t.Fatalf("round trip of %d bytes behind %d records without data: %d bytes, %v", len(data), run, len(got), err)
		}
	})
}

// Records over the limits are refused before any decryption.
func TestTLSRecordLimits(t *testing.T) {
	r := recordPair(t, suiteAES128)
	for name, rec := range map[string][]byte{
		"ciphertext over 2^14+256": {RecordTypeData, 3, 3, (MaxCiphertext + 1) >> 8, (MaxCiphertext + 1) & 0xff},
		"shorter than a tag":       append([]byte{RecordTypeData, 3, 3, 0, 16}, make([]byte, 16)...),
		"version":                  {RecordTypeData, 3, 1, 0, 30},
		"plaintext alert":          {RecordTypeAlert, 3, 3, 0, 2, 2, 40},
	} {
		if _, err := r.Open(rec, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Content over 2^14 bytes inside a record that authenticates.
	big := r.out.SealRecord(nil, RecordTypeData, make([]byte, MaxPlaintext+1))
	if _, err := r.Open(big, 0); err == nil {
		t.Error("content over 2^14 bytes: accepted")
	}
}
