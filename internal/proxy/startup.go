package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Limits of the phase before the upstream has authenticated the client,
// PostgreSQL's own (src/backend/postmaster/postmaster.c,
// src/backend/libpq/auth.c, auth-scram.c).
const (
	// maxStartup bounds a startup packet (MAX_STARTUP_PACKET_LENGTH).
	maxStartup = 10000
	// maxAuthToken bounds the body of a password, GSSAPI or SSPI reply,
	// and of a SASL reply for mechanisms other than SCRAM
	// (PG_MAX_AUTH_TOKEN_LENGTH).
	maxAuthToken = 65535
	// maxSASLMessage bounds the body of a SCRAM reply
	// (PG_MAX_SASL_MESSAGE_LENGTH).
	maxSASLMessage = 1024
	// maxAuthServerMessage bounds a message of the upstream before
	// AuthenticationOk (libpq accepts far less).
	maxAuthServerMessage = 1 << 20
	// maxRefusal bounds the upstream's answer to a startup packet the
	// proxy does not understand (relayed as it is).
	maxRefusal = 64 << 10
	// authTimeout bounds the startup and authentication phase, like
	// PostgreSQL's authentication_timeout default.
	authTimeout = time.Minute
)

// Authentication request codes (AuthenticationXXX messages).
const (
	authOK                = 0
	authCleartextPassword = 3
	authMD5Password       = 5
	authGSS               = 7
	authGSSContinue       = 8
	authSSPI              = 9
	authSASL              = 10
	authSASLContinue      = 11
)

// errReplyTooLong ends a login whose client announced a reply longer than
// PostgreSQL accepts.
var errReplyTooLong = errors.New("authentication reply longer than the server accepts")

// readStartup reads one untyped startup-phase packet (length, body).
func readStartup(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n < 8 || n > maxStartup {
		return nil, fmt.Errorf("invalid startup packet length %d", n)
	}
	pkt := make([]byte, n)
	copy(pkt, hdr[:])
	if _, err := io.ReadFull(r, pkt[4:]); err != nil {
		return nil, err
	}
	return pkt, nil
}

// startupPhase answers SSLRequest and GSSENCRequest, forwards a
// CancelRequest, and returns the client's startup packet with its
// parameters; params is nil when the packet is not a well-formed protocol
// 3 startup message (the upstream is to judge it, see refuse). ok is
// false when the connection is done.
func (p *Proxy) startupPhase(ctx context.Context, client net.Conn, cr *bufio.Reader) (startup []byte, params map[string]string, ok bool) {
	for {
		pkt, err := readStartup(cr)
		if err != nil {
			return nil, nil, false
		}
		switch code := binary.BigEndian.Uint32(pkt[4:8]); code {
		case sslRequestCode, gssEncRequestCode:
			if cr.Buffered() > 0 { // nothing may follow before our answer (CVE-2021-23222)
				return nil, nil, false
			}
			if _, err := client.Write([]byte{'N'}); err != nil {
				return nil, nil, false
			}
		case cancelRequestCode:
			var m pgproto3.CancelRequest
			if err := m.Decode(pkt[4:]); err == nil {
				p.cancel(ctx, &m, pkt)
			}
			return nil, nil, false
		default:
			if code>>16 != 3 {
				return pkt, nil, true
			}
			// Protocol 3.x: pgproto3 decodes 3.0 only; a newer minor
			// version is the server's to negotiate
			// (NegotiateProtocolVersion), its parameters are the same.
			body := append([]byte(nil), pkt[4:]...)
			binary.BigEndian.PutUint32(body, pgproto3.ProtocolVersionNumber)
			var m pgproto3.StartupMessage
			if err := m.Decode(body); err != nil {
				// PostgreSQL also takes a packet whose final
				// terminator is missing (the packet's end ends the
				// list); pgproto3 does not.
				if err := m.Decode(append(body, 0)); err != nil {
					return pkt, nil, true
				}
			}
			return pkt, m.Parameters, true
		}
	}
}

// refuse relays the upstream's answer to a startup packet the proxy does
// not take (an unsupported protocol version, a malformed packet): the
// server's own error, byte for byte (protocol 2 errors are not framed
// like protocol 3's), and the client's bytes (cr) to the server, at most
// maxRefusal bytes each way within authTimeout; it ends when either side
// closes.
func refuse(client net.Conn, cr *bufio.Reader, up net.Conn) {
	_ = up.SetReadDeadline(time.Now().Add(authTimeout))
	go func() {
		_, _ = io.Copy(up, io.LimitReader(cr, maxRefusal))
		_ = up.Close()
	}()
	_, _ = io.Copy(client, io.LimitReader(up, maxRefusal))
	_ = client.Close()
}

// authenticate relays the authentication exchange of a client whose
// startup packet went to up: each upstream message goes to the client;
// one client reply is read (PostgreSQL's size limit for the method
// requested, the client disconnected at once above it) and relayed for
// every request that takes one. It returns, once the upstream sent
// AuthenticationOk, the upstream bytes read after it; or an error when
// the login failed (the upstream's ErrorResponse was relayed), a reply
// was too long, or a connection failed. Client bytes not read as replies
// stay in cr.
func authenticate(client net.Conn, cr *bufio.Reader, up net.Conn) ([]byte, error) {
	ur := bufio.NewReaderSize(up, relayBuffer)
	asks := make(chan int, 16) // the size limit of each reply the upstream asked for
	stop := make(chan struct{})
	replies := make(chan error, 1)
	go func() { replies <- relayReplies(cr, client, up, asks, stop) }()
	finish := func() error {
		close(stop)
		_ = client.SetReadDeadline(time.Now()) // interrupts a reply awaited
		err := <-replies
		_ = client.SetReadDeadline(time.Now().Add(authTimeout))
		return err
	}
	saslLimit := maxAuthToken
	for {
		_ = up.SetReadDeadline(time.Now().Add(authTimeout))
		msg, err := readMessage(ur, maxAuthServerMessage)
		if err != nil {
			if rerr := finish(); rerr != nil {
				err = rerr
			}
			return nil, err
		}
		done := false
		if msg[0] == 'R' && len(msg) >= 9 {
			switch binary.BigEndian.Uint32(msg[5:9]) {
			case authOK:
				done = true
			case authCleartextPassword, authMD5Password, authGSS, authGSSContinue, authSSPI:
				asks <- maxAuthToken
			case authSASL:
				saslLimit = saslReplyLimit(msg[9:])
				asks <- saslLimit
			case authSASLContinue:
				asks <- saslLimit
			}
		}
		if _, err := client.Write(msg); err != nil {
			_ = finish()
			return nil, err
		}
		switch {
		case msg[0] == 'E':
			_ = finish()
			return nil, errors.New("upstream refused the login")
		case done:
			if err := finish(); err != nil {
				return nil, err
			}
			_ = up.SetReadDeadline(time.Time{})
			rest, _ := ur.Peek(ur.Buffered())
			return rest, nil
		}
	}
}

// saslReplyLimit is PostgreSQL's limit for the SASL replies of an
// AuthenticationSASL whose mechanism list (NUL-terminated names) is
// mechs: maxSASLMessage when every mechanism is SCRAM, else maxAuthToken.
func saslReplyLimit(mechs []byte) int {
	seen := false
	for _, m := range strings.Split(string(mechs), "\x00") {
		if m == "" {
			continue
		}
		if !strings.HasPrefix(m, "SCRAM-") {
			return maxAuthToken
		}
		seen = true
	}
	if !seen {
		return maxAuthToken
	}
	return maxSASLMessage
}

// relayReplies reads one client message per value of asks (its body size
// limit) and writes it to up, until stop is closed. A message over its
// limit closes both connections at once (nothing of it is read), as does
// any other failure.
func relayReplies(cr *bufio.Reader, client, up net.Conn, asks <-chan int, stop <-chan struct{}) error {
	err := relayRepliesUntil(cr, up, asks, stop)
	if err != nil {
		_ = client.Close()
		_ = up.Close()
	}
	return err
}

func relayRepliesUntil(cr *bufio.Reader, up net.Conn, asks <-chan int, stop <-chan struct{}) error {
	for {
		var limit int
		select {
		case <-stop:
			return nil
		case limit = <-asks:
		}
		hdr, err := cr.Peek(5)
		if err != nil {
			select {
			case <-stop: // interrupted by finish; the bytes stay in cr
				return nil
			default:
				return err
			}
		}
		n := int(binary.BigEndian.Uint32(hdr[1:5]))
		if n < 4 || n-4 > limit {
			return fmt.Errorf("%w: %d bytes announced, limit %d", errReplyTooLong, n-4, limit)
		}
		msg := make([]byte, n+1)
		if _, err := io.ReadFull(cr, msg); err != nil {
			return err
		}
		if _, err := up.Write(msg); err != nil {
			return err
		}
	}
}

// readMessage reads one typed message of at most limit bytes (type and
// length included).
func readMessage(r *bufio.Reader, limit int) ([]byte, error) {
	hdr, err := r.Peek(5)
	if err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:5]))
	if n < 4 || n+1 > limit {
		return nil, fmt.Errorf("invalid message length %d", n)
	}
	msg := make([]byte, n+1)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	return msg, nil
}
