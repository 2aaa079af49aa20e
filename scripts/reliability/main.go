// Command reliability turns `go test -json` output into docs/RELIABILITY.md:
// one row per fault (what must happen, the tests that show it, and their
// result in that run) and the figures the load tests print as
// "FIGURE name value unit" lines. `make reliability` runs the tests and
// this command, and asks it which tests to run:
//
//	go run ./scripts/reliability -run-pattern          # the -run pattern of the rows' tests
//	go run ./scripts/reliability -packages             # their packages
//	go run ./scripts/reliability -load -run-pattern    # the same for the load tests
//	go run ./scripts/reliability -load -packages
//	go run ./scripts/reliability -o docs/RELIABILITY.md results.json...
//
// The load tests are the tests of files built only with the build tag
// reliability (//go:build reliability): they run after the rest, alone
// (go test -p 1 -tags reliability), so they measure the code and not the
// suite beside them. Which tests and packages run is read from the
// repository's test files, so no list is kept by hand.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"go/build/constraint"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// cannotApply matches the tests whose skips are cases a source cannot
// have (the conformance suite's t.Skip with the reason): counted apart,
// neither as passes nor as failures. Any other skip fails its row.
var cannotApply = regexp.MustCompile(`^TestConformance(Verify)?/`)

// loadTag is the build tag of the load tests.
const loadTag = "reliability"

// row is one fault of the matrix.
type row struct {
	area, fault, must string
	// tests are regular expressions matched against full test names
	// (Test/Sub/Sub) of the packages' results.
	tests []string
}

var rows = []row{
	// Registry faults.
	{"registry", "connection refused, DNS failure, TLS failure (untrusted certificate)",
		"fetch fails; nothing marked, deleted or written but the status; status names the fault; the catalog revision does not move; the next healthy run heals with no spec writes",
		[]string{`^TestFaultMatrix(OCI|HTTP)/(connection_refused|DNS_failure|TLS_failure)/`}},
	{"registry", "401, 403",
		"as above; the status names the status code",
		[]string{`^TestFaultMatrix(OCI|HTTP)/40[13]/`}},
	{"registry", "429 with Retry-After: 3600",
		"as above, and the fetch is not parked for an hour: it fails within the source's timeout",
		[]string{`^TestFaultMatrix(OCI|HTTP)/429_with_Retry-After/`}},
	{"registry", "500, 502, 503 (every request; the catalog only; every manifest)",
		"as above; a registry whose every repository fails is a failed fetch, not N entry errors",
		[]string{`^TestFaultMatrix(OCI|HTTP)/(50[023]|catalog_500|every_manifest_500)/`}},
	{"registry", "slow headers, slow body past the timeout",
		"fetch fails with \"did not finish within\"; nothing changes",
		[]string{`^TestFaultMatrix(OCI|HTTP)/slow_(headers|body)/`}},
	{"registry", "truncated body, garbage body, oversized index",
		"fetch fails (a short listing is never taken for a complete one); nothing changes",
		[]string{`^TestFaultMatrix(OCI|HTTP)/(truncated_body|garbage_body|oversized_body)/`}},
	{"registry", "catalog page k fails (k = 1, 2, 3; reference registry, real Link pagination)",
		"fetch fails naming page k and its 500; every spec stays active",
		[]string{`^TestFaultMatrixCatalogPageK/`, `^TestScenarioCatalogSecondPageFails$`}},
	{"registry", "a registry that does not paginate its catalog: cuts it at n without a Link header, ignores last=, or ignores both and always answers the whole list",
		"a full page without a Link header is checked with one last= request; a cut list fails the fetch naming page_size and repositories as the cures, so nothing past the cut is marked; a registry that honours last= or lists everything is read completely",
		[]string{`^TestOCICatalogFullPageWithoutLink/`}},
	{"registry", "one manifest 404 (by digest) or one config blob 500 among many",
		"that entry's error is recorded against its spec, which keeps its last good version, active; the others are served; a first run creates the others only",
		[]string{`^TestFaultMatrixOCIEntries/(one_manifest_404|one_config_blob_500)`}},
	{"registry", "garbage base64 label, garbage YAML label, invalid spec, oversized label",
		"a broken entry keeps its last good version: kept, not marked; error recorded on the spec and in the status; the spec heals with the same id",
		[]string{`^TestFaultMatrixOCIEntries/(garbage_base64|garbage_YAML|invalid_spec|oversized_label)`, `^TestScenarioBadLabelAmongMany$`}},
	{"registry", "a tag that answers 404",
		"the rule for \"no longer offered\": marked (hidden, same id), not deleted that run; unmarked when it returns",
		[]string{`^TestFaultMatrixOCITagVanishes$`, `^TestScenarioVanishThenReturn$`}},
	{"registry", "registry down on a later run; empty listing",
		"an outage changes nothing; the always-on empty-listing guard",
		[]string{`^TestScenarioRegistryDownOnSecondRun$`, `^TestScenarioEmptyListingGuard$`, `^TestE2EFailingRegistryKeepsItsSpecs$`}},
	{"registry", "auth google: the access token expires between runs, or enters its early-refresh window",
		"the token is reused while it is valid and replaced before it expires; the run after an expiry uses a new one and reconciles; no token in the store, the logs or an error",
		[]string{`^TestTokenReusedWhileValidAndRefreshedAfterExpiry$`, `^TestTokenRefreshedBeforeItExpires$`, `^TestScenarioArtifactRegistryWithGoogleAuth$`}},
	{"registry", "auth google: the token server is down; no Application Default Credentials",
		"fetch fails, naming the cause (and how to provide credentials) and no secret; nothing marked; the next fetch after it is back succeeds",
		[]string{`^TestTokenServerDownFailsTheFetch$`, `^TestMissingCredentialsSayHowToProvideThem$`, `^TestScenarioArtifactRegistryWithGoogleAuth$`}},
	{"registry", "auth google: the registry refuses the token the source holds (stale); a realm on another host; a redirect to plain HTTP",
		"fetch fails with the registry's 401 and no secret; no token is sent to another host or over plain HTTP",
		[]string{`^TestRegistryRefusingAStaleTokenFailsTheFetch$`, `^TestTokenGoesToNoOtherHost$`, `^TestCloudStorageIndex$`}},
	{"registry", "Artifact Registry prefix: a tags/list page of a child fails, a child is refused, a full page without a Link, a malformed child",
		"the whole listing fails; nothing marked",
		[]string{`^TestArtifactRegistryFailedChildrenPageFailsTheListing$`}},
	{"registry", "Docker Hub and GHCR listing APIs: connection refused, DNS, TLS; 401, 403; page 2 answering 500 or 503 (every retry), slow, garbage; Docker Hub's login refused; the registry's token service down",
		"fetch fails (a listing is read to its end or not at all, as a catalog is); nothing marked, deleted or written but the status, which names the page and the fault; no repository is read from a failed listing; the next healthy run heals",
		[]string{`^TestFaultMatrixHubs/(dockerhub|ghcr)/(connection_refused|DNS_failure|TLS_failure|40[13]|page_2_(500|503|slow|garbage)|login_refused|token_service_down)`, `^Test(DockerHub|GHCR)ListingFaultsFailTheFetch/(401|403|500|50[23]_on_page_3|garbage|no_results)`, `^Test(DockerHub|GHCR)TimeoutFailsTheFetch$`}},
	{"registry", "Docker Hub and GHCR: 429 with Retry-After: 3600 on page 2 (and Docker Hub's X-Retry-After); GitHub's 403 with x-ratelimit-remaining: 0",
		"the fetch fails at once, within the source's timeout, naming the page and when to come back; it never waits for it; nothing changes",
		[]string{`^TestFaultMatrixHubs/(dockerhub|ghcr)/(429_with_Retry-After|primary_rate_limit)/`, `^Test(DockerHub|GHCR)ListingFaultsFailTheFetch/(429_with_Retry-After|primary_rate_limit)`}},
	{"registry", "Docker Hub and GHCR: a listing page truncated (a body shorter than its Content-Length) or cut short (fewer items than the page size, or none, while a next page is linked)",
		"fetch fails naming the page; a short listing is never taken for a complete one; nothing changes",
		[]string{`^TestFaultMatrixHubs/(dockerhub|ghcr)/page_2_(truncated_body|cut_short)/`, `^Test(DockerHub|GHCR)ListingFaultsFailTheFetch/(truncated_body|short_page|empty_page)`}},
	{"registry", "Docker Hub and GHCR: the total changes between pages (Docker Hub's count, GitHub's rel=\"last\" page count); the listing ends before its total or runs past it; a page links back to an earlier one, lists a name again, or links off the API's host; a GHCR package deleted from a page already read (GitHub gives no total: the next page's first package would go unseen)",
		"fetch fails naming the page (a listing that shifted under its pages may have skipped entries); a GHCR listing of several pages is read twice and the readings must agree; the credentials never follow a link off the API's host; nothing changes",
		[]string{`^TestFaultMatrixHubs/(dockerhub|ghcr)/(total_changes_on_page_2|page_2_links_to_itself)/`, `^Test(DockerHub|GHCR)ListingFaultsFailTheFetch/(count_changes|page_count_changes|ends_early|more_pages|loops|links_itself|repeats_a_page|next_leaves|another)`, `^TestGHCRPackageGoneBetweenPages$`}},
	{"registry", "Docker Hub and GHCR entries: a broken label or an invalid name among good ones, an entry the API stops listing, and back; a failed page while one is gone",
		"the broken entry's error is recorded and it keeps its last good version; the others are served; the missing one is marked (same id) only by a whole listing, and unmarked when it is listed again",
		[]string{`^TestScenarioHubEntries/`, `^Test(DockerHub|GHCR)Entries$`}},
	{"registry", "Helm chart repository: index 500, 401, 404, truncated, garbage, not an index, oversized, too slow (the index or an archive)",
		"fetch fails naming the repository; nothing marked (a short listing is never taken for a complete one)",
		[]string{`^TestHelmRepositoryIndexFailures/`}},
	{"registry", "Helm chart: broken archive (not gzip, not tar, truncated), digest mismatch, missing or foreign Chart.yaml, bad values.schema.json, oversized archive or unpacked size, path traversal, absolute path or link in the archive, archive 404; in an OCI registry a broken chart layer or config",
		"that chart's error, naming why: it keeps its last good version, active, the error recorded; the other charts are served; the listing carries no ETag, so the next run reads the index again; a broken archive is cached by its digest, not downloaded again",
		[]string{`^TestHelmRepositoryBrokenCharts/`, `^TestHelmRepositoryBrokenChartCached$`, `^TestHelmOCIFaults$`, `^TestScenarioBrokenChartKeepsLastGoodVersion$`}},
	{"registry", "a held-back version behind an unchanged index (304); the same index after an outage",
		"no ETag is sent after a run that held a version back, failed or was guarded: the version is adopted once its blockers are gone, and the run after an outage reads the index whole (never a 304 taken for an empty listing)",
		[]string{`^TestScenarioHeldBackChartAdoptedBehindAnETag$`, `^TestChartVersionIsMaintenanceInfo$`}},
	{"registry", "a new instance (an empty manifest cache) on an OCI registry whose tags did not move, or moved for one repository of 1,000; an event for an unchanged tag; a source through the OCI path (oci, dockerhub, ghcr); helm charts, both forms (an index that changed, a chart that moved)",
		"an unchanged repository costs one HEAD: the tag lookups alone show the listing unchanged (no manifest or config GET, one Firestore read); a changed listing reads only the moved repositories, the others given back from the hints of the manifest the run trusts, read once (no Firestore read more than without them)",
		[]string{`^TestColdRunCostsOneHeadARepository$`, `^TestOCIPathSourcesTakeHints/`, `^TestHelmTakesHints/`, `^TestColdHelmRunReadsOnlyWhatMoved/`}},
	{"registry", "a hint in doubt: a repository pushed back to an older digest; a broken label; a manifest that answered 404 (its tag moved between the lookup and the read) while nothing else changed; a held-back version; a manifest of the version before (no upstream digests); a manifest not trusted (a run began writing after it); a hint that names another spec name than the store's",
		"never taken: the entry is read, the older version adopted again; a broken entry is read on every run that reads and keeps its last good version; an unreadable manifest is read again by the next run, until it reads; the version before's manifest and an untrusted one give no hints, and the next full run records them; a plan that would write a hinted entry is refused; the checker's manifest rule catches a hint the store does not bear out",
		[]string{`^TestHintsNeverStandForWhatIsInDoubt$`, `^TestOCIHints$`, `^TestListingPartsKeepUpstreamOnlyForWhatIsCertain/`, `^TestHintedCandidatesAreOnlyUnchanged$`, `^TestCheckerDetectsSeededViolations/trusted_manifest_hints`}},
	{"registry", "the store fails while the run answers the source for hints; a release that reads images differently (the spec's parsing, labels, platforms)",
		"the run fails (retryable) before anything is read upstream or written, never recorded as a failed fetch; the read version in every upstream digest must change with what an image gives (a fingerprint of a corpus of images fails otherwise), so every image is read again once",
		[]string{`^TestStoreFailingToAnswerForHintsFailsTheRun$`, `^TestOCIReadVersionNamesWhatAnImageGives$`}},
	// Pub/Sub.
	{"registry", "every source through one conformance table (oci, the Artifact Registry children walk, http, dir, dockerhub, ghcr, both forms of helm, and each new source): empty, entries over several pages, a garbage entry among good ones, an entry gone and back, the upstream unavailable; on the listing: 401, 429 with Retry-After, 5xx on the first or a later page, a partial (truncated) page, a garbage page, a timeout",
		"a failed or partial listing is the fetch's error, whichever page and however it fails (retries of the page meet the fault again), of the fault's class (the upstream's status and its Retry-After, a truncated body, a body that does not parse, a timeout) and saying so, and the next clean fetch lists everything; a broken entry is that entry's error beside good ones; an entry that goes is absent, comes back under its name; an unchanged upstream lists with an unchanged digest; a case a source cannot have is skipped with the reason and not counted",
		[]string{`^TestConformance/`}},
	{"verify", "a registry with a verify block, through the conformance table (every source whose entries are OCI manifests): an entry unsigned, signed with another key, by another identity or issuer, a signature of another digest, a tampered payload; signatures on a registry with and without the referrers API, and cosign's .sig tag",
		"each refused entry is that entry's error saying why, in one line, with no Upstream (a signature pushed later is found); each signed one is offered with who signed it and the digest",
		[]string{`^TestConformanceVerify/`, `^TestVerifyOffersOnlySigned$`, `^TestVerifySignedAfterPush$`}},
	{"verify", "an unsigned push, read by a full run and by a webhook's targeted run",
		"the spec keeps its last verified version, active, not marked; the run and the spec record why; the catalog revision does not move; signed later, the version is adopted with its provenance, in the catalog and the change feed",
		[]string{`^TestVerifyRefusedEntryKeepsItsVerifiedVersion$`}},
	{"verify", "a signature pushed later, announced by webhook: cosign's .sig or .att tag, the referrers tag schema, a referrer pushed without a tag; to a registry with and without a verify block, from the distribution registry itself, Harbor, Quay, GitHub and Artifact Registry",
		"the repository's entry is enqueued (never the signature's tag), for a verifying registry only; its run verifies it again (a refusal is never reused: it costs its lookups each run) and publishes the spec with its provenance, reading that repository alone",
		[]string{`^TestVerifySignaturePushedLaterPublishesThroughTheHook$`, `^TestVerifyUnsignedEntryCostsItsLookupsEachRun$`, `^TestHookSignaturePush`, `^TestRouteSignaturePush$`, `^TestQuaySelectsASignaturePushWhenItVerifies$`}},
	{"verify", "signature lookups answer 5xx (after the retries); a key or trusted root that cannot be read",
		"the fetch fails whole (failure Unavailable, or Precondition for the key): nothing marked or changed, the run's error says so",
		[]string{`^TestVerifyFailuresFailTheFetch$`, `^TestConformanceVerify/.*/a_signature_lookup_5xx`, `^TestVerifyRefusedEntryKeepsItsVerifiedVersion$`}},
	{"pubsub", "every message delivered three times, copies in reverse order; stale messages of a finished operation after the next one started",
		"redelivery is harmless: each registry counts once per operation; stale messages change nothing; the operations succeed",
		[]string{`^TestPubSubDuplicateAndOutOfOrderDeliveries$`, `^TestWorkerRedeliveryCountsOnce$`}},
	{"pubsub", "a registry's report message delivered twice; its reconcile message redelivered after the report was published and before it was recorded (a second run, a second report)",
		"each report is recorded once and the first recorded counts: the run that wrote, not the re-run's \"unchanged\"; the operation finishes once, at the revision of its changes",
		[]string{`^TestWorkerReportsRedeliveredOrRunTwiceCountOnce$`}},
	{"pubsub", "redelivery while a crashed run's lease holds, and after it expired",
		"retryable error (nack) while held, never a wait; the redelivery after expiry runs and reports",
		[]string{`^TestPubSubRedeliveryAfterLeaseExpiry$`, `^TestWorkerBusyLeaseIsRetried$`, `^TestLeaseExpires$`}},
	{"pubsub", "poison message (undecodable) in place of a registry's message",
		"dropped once, never retried; the operation fails at its deadline naming that registry",
		[]string{`^TestPubSubPoisonMessageFailsTheOperationWithAReason$`, `^TestWorkerPermanentFailuresAreAcknowledged$`}},
	{"pubsub", "commit requests on the ordered commit subscription: pushed one at a time, a refused push comes again first; a push held past its ack deadline is delivered again while it still runs",
		"what the committer's serialization rests on, checked in the emulator (with unordered delivery as the control); two commits at once (the redelivery) number every change once, revisions dense",
		[]string{`^TestPubSubPushOrdering`, `^TestCommitRaceNumbersEachChangeOnce$`, `^TestConcurrentCommitsAreDense$`}},
	{"pubsub", "the commit after a bootstrap's last report fails; its report message is redelivered, or (the report lost to dead letters) its reconcile message; duplicate commit requests and reports",
		"the operation stays in progress, committing, until the committer finishes it, then succeeds with its catalog revision; the redelivered report records nothing more and commits; the redelivered reconcile message asks again (no second run); duplicates change nothing; one that never commits fails at the deadline, saying so",
		[]string{`^TestWorkerOperationWaitsForItsCommit$`, `^TestOperationDeadlineAndRetention$`}},
	// Events: targeted runs and their coalescing.
	{"events", "200 event messages for one registry in 2 s (five entries pushed again and again, one deleted near the end), delivered concurrently like a push subscription, every retryable answer delivered again with backoff; a cooldown of 200 ms (the 1,000-event storm is a load row)",
		"converges to upstream's final state (a dry run plans nothing, the deleted entry is marked), no lease left behind, the checker passes; a few runs (one a cooldown at most during the storm, one an entry after it), never one per event: the test fails past 25",
		[]string{`^TestWorkerEventStorm$`}},
	{"events", "an event racing a full run, both ways round: the full run fetched before the event's run wrote and takes the lease after it; the event's run holds the lease when the full run wants it",
		"nothing goes back: the overtaken full run fetches again, the busy one is retried; the store ends in upstream's state",
		[]string{`^TestWorkerEventRacesAFullRun/`, `^TestFullRunOvertakenByAnEventFetchesAgain$`}},
	{"events", "an event for a repository the registry does not select (allow, deny, the repository list)",
		"no run: no lease, no fetch upstream, no write",
		[]string{`^TestWorkerEventForARepositoryNotSelected$`, `^TestTargetedRunOfNothingSelected$`, `^TestOCIFetchEntriesRefusesWhatItDoesNotSelect$`}},
	{"events", "an event while the registry is down",
		"the targeted run's fetch fails: nothing marked, no spec written, the manifest stays trusted, the status says so; the message is acknowledged; the next run catches up",
		[]string{`^TestWorkerEventWhileTheRegistryIsDown$`, `^TestTargetedRunWhileTheRegistryIsDown$`}},
	{"events", "replayed events; a message while another run holds the registry, or less than a cooldown after a run",
		"a replay older than the run that covered it is acknowledged with one status read, no run; one that runs changes nothing; a busy or cooling-down message is handed back to Pub/Sub without a run, and done once a run that started after it covers it",
		[]string{`^TestWorkerRunsAnEventsEntries$`, `^TestTargetedRunKeepsTheListingDigest$`, `^TestWorkerEventBusyAndCooldown$`, `^TestDecideEvent$`}},
	{"events", "events, then a full run: an update, an entry gone, one broken, a new one, one offering an id another entry holds, one not selected, a replay, and a change no event announced",
		"the full run ends in exactly the store and the feed a full run alone makes of the same upstream",
		[]string{`^TestEventsThenAFullRunIsAFullRunAlone$`}},
	{"events", "a targeted run, or the commit after it, dies after its k-th write, for every k",
		"every state passes the checker (no manifest is trusted while the run writes); the redelivered event (a full run when the manifest is not trusted) and a commit end exactly where the uninterrupted run and commit do",
		[]string{`^TestCrashAfterEveryWriteOfATargetedRun`}},
	// Concurrency.
	{"concurrency", "ten bootstraps at once (HTTP)",
		"bootstraps coalesce: one operation, its messages published once",
		[]string{`^TestTenConcurrentBootstrapsOneOperation$`, `^TestConcurrentStartsCoalesce$`}},
	{"concurrency", "two reconciles of one registry at once",
		"reconciles of one registry never interleave (one holds the lease, the other is busy)",
		[]string{`^TestScenarioConcurrentReconciles$`}},
	{"concurrency", "60 provision-vs-mark-and-delete and 20 deprovision-vs-delete races at once",
		"nothing in use is deleted: no instance of a deleted spec, no referenced spec deleted (checker)",
		[]string{`^TestRacesProvisionVersusDelete$`, `^TestScenarioProvisionRacesDelete$`, `^TestConcurrentProvisionAndDelete$`}},
	{"concurrency", "a plan change (PATCH), a bind, and a bind against a deprovision, each racing mark-then-delete of the spec (18 races at once, through the broker)",
		"a plan change lands while the spec is active (the per-plan pin moves with it) or is refused as marked, moving nothing; a marked spec's instance still takes a binding and the spec is kept, pinned by the instance alone; a bind racing a deprovision lands first (and is taken along) or finds no instance; the spec is deleted once its instance is gone, whatever bindings it had; no binding outlives its instance (checker)",
		[]string{`^TestRacesPatchAndBindVersusMarkAndDelete$`}},
	{"concurrency", "a deprovision while the instance still has bindings (OSB leaves it to the broker); a binding of an instance whose spec is marked",
		"the instance goes with its bindings in one transaction (its listing of them locks their range, so a bind orders against it); their last_operation then answers 410; bindings never pin: the spec is kept for its instance alone and deleted once it is gone",
		[]string{`^TestDeprovisionWithBindings$`, `^TestDeprovisionTakesBindingsAlong$`, `^TestBindingsDoNotPinSpecs$`}},
	{"concurrency", "100 provisions of one plan at once; 100 identical provisions of one id; 100 differing provisions of one id; 100 binds of one instance (through the broker)",
		"no shared document: every distinct provision is 201; identical ones are one 201 and 200 for the rest, differing ones one 201 and 409 for the rest; every bind is 201; none is 422 ConcurrencyError; each answer validates against the OSB OpenAPI file",
		[]string{`^TestBurstProvisionsOfOnePlanAllCreated$`, `^TestBurstIdenticalProvisionsOfOneID$`, `^TestBurstDifferingProvisionsOfOneID$`, `^TestBurstBindsOfOneInstanceAllCreated$`}},
	{"concurrency", "100 identical binds of one binding id at once; 50 differing binds of one binding id at once (through the broker)",
		"binds share no lock on the id (it is not read in the bind's transaction): identical ones are one 201 and 200 for the rest, differing ones one 201 and 409 for the rest, and the record is the 201's; none is 422 ConcurrencyError; each answer validates against the OSB OpenAPI file",
		[]string{`^TestBurstIdenticalBindsOfOneID$`, `^TestBurstDifferingBindsOfOneID$`}},
	{"concurrency", "a burst of 50 provisions of one spec racing its mark and delete (through the broker)",
		"provisions conflict with the delete only: the spec is deleted only if no provision was created, each 201 is a stored instance, each refusal the marked spec's 400; no instance of a deleted spec (checker)",
		[]string{`^TestBurstProvisionsVersusDelete$`}},
	{"concurrency", "an instance provisioned on a plan (or platform) after a run read the spec's usage, the run adopting a version that drops it",
		"the adoption is refused retryably (store.ErrStranded) by its in-transaction query of the spec's instances, on the run's batch and the per-spec path alike; nothing is written, and a version that drops nothing costs no read more",
		[]string{`^TestNewVersionNeverStrandsALateInstance$`}},
	{"concurrency", "a provision of a spec marked for deletion, straight at the store (not through HTTP)",
		"CreateInstance refuses it (invalid, not retryable), writes no instance and counts nothing; once the spec is unmarked the same provision is recorded",
		[]string{`^TestCreateInstanceRefusesAMarkedSpec$`}},
	{"concurrency", "100 registries of 100 specs reconciled at once, commit requests through the ordered push subscription",
		"no reconcile run touches meta/catalog (every transaction watched on the wire: 0); the committer's meta/catalog transactions are never aborted, one commit at a time; the feed ends dense at revision 10,000",
		[]string{`^TestHundredRegistriesAtOnceNeverContendOnTheCatalog$`}},
	{"concurrency", "100 registries reconciled at once through the worker, their reports through the ordered push subscription",
		"every report recorded, each one transaction on the operation document, none aborted or retried (watched on the wire), one message handled at a time; the last report commits and finishes the operation: succeeded, 100 results, catalog revision 100",
		[]string{`^TestHundredReportsAtOnceNeverContendOnTheOperation$`}},
	// Crashes.
	{"crash", "the reconcile, or the committer after it, dies after its k-th write, for every k of a run and its commit (a gRPC interceptor on a real client fails every later commit)",
		"every intermediate state passes the checker (the manifest rule too: a manifest is never trusted once a run began writing after it); after a dead run the next run and a commit, after a dead committer the next commit alone, reach exactly the state of one uninterrupted run and commit (a crashed run's marks do not count as an earlier run); every revision is published at least once, in order; one more run reaches exactly two uninterrupted runs' state",
		[]string{`^TestCrashAfterEveryWrite`, `^TestManifestNotTrustedAfterACrash`}},
	{"firestore", "the database unreachable mid-run (after the run's third write), back after 300 ms, or after longer than a run may take",
		"the client rides a brief outage out; a longer one fails the run (retryable) and a later run recovers; the end state is exactly one uninterrupted run's; every state passes the checker",
		[]string{`^TestFirestoreOutageMidRun`}},
	{"firestore", "a report fails after the run wrote: its publish (1, 2 or 3 times, Pub/Sub unavailable), or its recording by the committer (1 or 2 commits fail with a transient error the client library does not retry itself)",
		"the worker retries the publish in process (0, 200 ms, 1 s), so the operation records the run that wrote, not a re-run's \"unchanged\"; past the attempts the reconcile message goes back to Pub/Sub and the redelivery reports once; a failed recording goes back to Pub/Sub and its redelivery records the run that wrote, once",
		[]string{`^TestWorkerRetriesAFailedReport/`}},
	// HTTP.
	{"http", "fuzzed bodies, methods, paths, queries, headers (seed corpora)",
		"never 5xx; every refusal an OSB error body; a refused bootstrap creates nothing; no answer holds the broker password; data consistent",
		[]string{`^FuzzDecodeBody$`, `^FuzzBrokerRequest$`, `^FuzzBootstrapParams$`, `^FuzzParse`}},
	{"http", "fuzzed inputs per route family on the emulators (instances: ids, service and plan ids, context, parameters, query; bindings: the same and bind_resource; the change feed over a history pruned in part; admin: path, method, query, Authorization; bootstrap), seed corpora in testdata",
		"never 5xx; every refusal an OSB error body without store text; no broker password, admin token or parameters canary in an answer, a header or the log; every log line JSON; a recorded context reads back as sent; a feed page starts at since+1, a pruned since is 410; admin endpoints write nothing; the invariant checker passes after every input",
		[]string{`^FuzzInstances$`, `^FuzzBindings$`, `^FuzzChangeFeed$`, `^FuzzAdmin$`, `^FuzzBootstrapParams$`}},
	{"http", "bad requests, oversized bodies, wrong credentials; bad updates, binds and unbinds",
		"400/409/410/413/422/401 with OSB bodies (OSB's status for each; a refused update says update_repeatable, and instance_usable when there is an instance); no 4xx writes anything; a wrong credential learns nothing (auth before the version check)",
		[]string{`^TestBadRequestsWriteNothing$`, `^TestBadUpdatesWriteNothing$`, `^TestBadBindingRequestsWriteNothing$`, `^TestProvisionBodyNearLimit$`, `^TestBrokerAuth$`, `^TestE2EBadInput$`}},
	{"http", "a Content-Length of 4 MiB with no body sent; chunked garbage past the limit whose end never comes (a real TCP client against the local stack; provision, update, bind, bootstrap)",
		"413 PayloadTooLarge before a byte of the body is read, and as soon as a chunked body crosses SPECSYNC_MAX_BODY_BYTES (never 400 MalformedJSON for a big non-JSON body); nothing written",
		[]string{`^TestE2EBodyLimit$`, `^TestDecodeBodyLimit$`}},
	{"http", "slow clients: headers that never end, a body that never arrives in full; oversized headers",
		"the local server cuts them off (read-header and read timeouts) and answers 431 to oversized headers without running a handler",
		[]string{`^TestSlowClientsAreCutOff$`}},
	{"http", "malformed ids on every route, in every place an id goes (., .., __x__, invalid UTF-8, a/b/c, 256 characters, NUL, newline), as path, query and body values; the same names straight at the store",
		"a 4xx OSB error naming the field before any store call, with no Firestore text (no project, database or document path, no gRPC status); nothing written; the store classifies such names as the caller's mistake (never retryable), and describes a backend's error by its kind alone",
		[]string{`^TestMalformedIDsEveryRoute$`, `^TestCheckID$`, `^TestStoreErrorsOfBadNames$`, `^TestDescribe$`, `^TestBootstrapInputContract$`}},
	{"http", "contexts Firestore's maps refuse (an array in an array, keys \"\" and __name__, 32 levels) and past the contract (33 and 400 levels, over 32 KiB); records written with the old map",
		"recorded as canonical JSON text, answered 201/200/409 as any context, shown as sent; past the limits a 400 naming the field and the limit (400 levels was a 503); old records read, compared, and moved to text by their next update",
		[]string{`^TestAnyContextOSBAllows$`, `^TestLegacyContextRecords$`}},
	{"http", "a query parameter given twice (since, limit, wait, plan_id, dry_run=true&dry_run=false); a query that does not parse; a body that stalls (chunked, past the read deadline)",
		"400 naming the query, nothing started or deleted; 408 for the stalled body, never taken for an empty one (POST /bootstrap went on with a cancelled request)",
		[]string{`^TestRepeatedQueryParameters$`, `^TestStalledBodyIs408$`, `^TestBootstrapInputContract$`}},
	{"http", "Authorization in another case (bearer, BASIC, extra spaces); two Authorization headers (good then bad, bad then good, the same twice) on broker, admin and webhook endpoints",
		"the scheme is case-insensitive (RFC 9110); two headers are a 400 (a webhook's 401) whichever holds the credential, never the first taken silently",
		[]string{`^TestAuthorizationParsing$`, `^TestHookAuthorizationParsing$`}},
	{"http", "a request identity on refusals before routing (413 declared and chunked, 404, 401, 400) and on headers over the local server's limit; a 5 KiB identity on a write",
		"echoed on every answer, 413 and 431 included; logged up to 4 KiB, a longer one as its size only",
		[]string{`^TestRequestIdentityEchoedAndCapped$`, `^TestOversizedHeadersEchoRequestIdentity$`, `^TestBrokerEchoesRequestIdentity$`}},
	{"http", "a newline-laden body (two forged EMERGENCY lines, plain text) to every endpoint of the local stack, in ids, queries, a context, an originating identity and Pub/Sub messages; the push path on the broker's port; the push endpoint without its token, with a wrong one, with a body that is not a push, a CloudEvent",
		"every log line is one JSON object and none has the sender's severity or message; the push path is a 404 on the broker's port; the push endpoint (its own loopback port) refuses what the Pub/Sub emulator would not send, logging reason and size, never the body; what the functions framework prints raw becomes JSON lines (each line read however long, kept up to 4 KiB)",
		[]string{`^TestE2ENoForgedLogLine$`, `^TestRelayLines$`, `^TestE2EEvents$`}},
	{"http", "the local stack cannot start (a bad listen address)",
		"Start returns the error and a nil stack, and closing that does nothing (its deferred Close dereferenced the nil stack, and the panic hid the error)",
		[]string{`^TestStartFailureReturnsTheError$`}},
	{"secrets", "canary secrets in registry credentials and broker settings",
		"secrets never travel: no canary in any Firestore document (every collection, field names, ids), message, log or response",
		[]string{`^TestE2ESecretCanary$`, `^TestCheckerDetectsSeededViolations/secret`}},
	{"secrets", "canary secrets, with every span exported (SPECSYNC_TRACE=stdout, ratio 1): runs, steps, webhook and event spans, Firestore's and Pub/Sub's own",
		"no canary in any span name, attribute, event or link; errors are spans' classes (error.type), never their text",
		[]string{`^TestE2ESecretCanary$`}},
	{"tracing", "a bootstrap fanned out over Pub/Sub (push), reports and the commit on the ordered commit topic, a sampling ratio of 0, an unsampled caller traceparent",
		"one trace: the request's server span, the publish, each registry's message, run and steps, the reports, the commit and the change publish, each under its right parent; the log lines inside carry the trace and one of its spans",
		[]string{`^TestE2ETraceOneBootstrapOneTrace$`, `^TestSamplerKeepsWhatMustBeKept$`, `^TestLinesInsideASpanCarryItsTrace$`}},
	{"tracing", "forced sampling: a sampled traceparent (or X-Cloud-Trace-Context o=1) on a bootstrap without the admin's credential, on a refused and an accepted catalog request at a ratio of 0, and with a trace id picked to fall under any ratio",
		"nothing exported and nothing flushed: the caller's trace is joined, never obeyed; requests are kept at the ratio by the instance's own draw, a bootstrap only when the admin's credential asked for it",
		[]string{`^TestE2ETraceOneBootstrapOneTrace$`, `^TestRequestTraceIsJoinedNotObeyed$`}},
	{"tracing", "the trace backend down: an OTLP receiver that takes every export and never answers (the exporter's and the batch's timeouts at ten minutes)",
		"every request answered as without tracing; a kept request waits for its flush at most the bound (5 s; shortened in the test), the export still held; with a batching exporter a handler's spans are exported before it returns",
		[]string{`^TestFlushIsBoundedWhenTheBackendHangs$`, `^TestHandlerFlushesBeforeItReturns$`}},
	{"secrets", "canary Docker Hub and GitHub tokens (from a file and the environment), the access and pull tokens they are traded for, APIs that echo the credentials they were sent in their errors",
		"no canary, traded token or Basic encoding in any Firestore document, message, log or response; the refusal is recorded with the echo redacted; a rotated secret is read at the next fetch",
		[]string{`^TestE2ESecretCanaryHubs$`, `^TestDockerHubErrorsHoldNoSecret$`, `^Test(DockerHubPrivateNamespace|GHCRPrivatePackagesWithAToken)$`}},
	{"secrets", "a registry with a user name and password, whose source the status page shows",
		"the page names the source (type, host or URL without user information, query or fragment, auth type) and never the user name, the password or where it is kept",
		[]string{`^TestE2EStatusPageInChromium$`, `^TestDescribeNamesTheSourceWithoutSecrets$`}},
	{"secrets", "a canary in every form a value takes in Firestore: a json.RawMessage the client stores as an array of integers, base64 (a Basic credential), a JSON text with \\u escapes (a context kept as text)",
		"the invariant checker's secret rule reads each form and reports the document, never repeating the canary",
		[]string{`^TestCheckerDetectsSeededViolations/secret_(in_a_json.RawMessage|base64-encoded|in_a_JSON_text_with_escapes)$`}},
	// The catalog cache.
	{"catalog", "changes a warm instance needs are gone (pruned by TTL) or written by older code (no spec_created_at)",
		"the refresh renders in full instead; the body equals a full render; later refreshes apply changes again",
		[]string{`^TestCacheFallsBackWhenChangesAreGone$`, `^TestCacheFallsBackOnChangesFromOlderCode$`}},
	{"catalog", "changes of one spec numbered out of write order (an id freed by one registry and taken by another, committed in the other order; a commit's batches), full renders over pending changes, random sequences",
		"the cache serves the state written last and never one older than it served; once all is committed its body is a full render's, byte for byte",
		[]string{`^TestCacheOneIDAcrossRegistries$`, `^TestCacheNeverGoesBack$`, `^TestCacheRenderSawPendingChanges$`, `^TestCacheMatchesFullRender/`}},
	{"catalog", "a revision read held in flight while a change commits; many requests during refreshes and writes",
		"a Cache-Control: no-cache request never gets an answer read before it arrived; such requests share the next read; race-free",
		[]string{`^TestCacheFreshSeesEveryEarlierCommit$`, `^TestCacheConcurrentRefreshes$`, `^TestCatalogNoCache$`}},
	{"catalog", "the change feed's revision listener: its stream cut and new listens refused (PermissionDenied), or cut and reopened by the client library into a listen that never answers (deaf); the revision going back (another database) under waiting long polls",
		"waiting long polls never fail nor hang: they get the change through the cached revision within the window; one warning however many waiters and retries; the listener is started again with backoff and heard again; a revision gone back is 410 Gone at once",
		[]string{`^TestListenerFailureFallsBackToTheWindow$`, `^TestDeafListenerFallsBackToTheWindow$`, `^TestLongPollRevisionGoesBack$`}},
	{"catalog", "only part of the feed's history pruned (revisions 1 and 2 expired and deleted, 3 to 5 kept), with and without limit",
		"a watcher at 0 or 1 gets 410 Gone at the current revision, never a page that starts past since+1; a watcher at 2 or later reads on from since+1",
		[]string{`^TestFeedGoneWhenThePrefixIsPruned$`}},
	{"catalog", "TTL expiry under a waiting watcher: Firestore's TTL deletes feed history in any order (revisions 6, then 2, then 4 of 8) while a long poll waits at the head and watchers lag behind",
		"the waiting poll gets the next commit's change, whole; a watcher behind reads each revision after its own once, in order, up to the first one gone, then 410 Gone at the current revision: never a page that skips one",
		[]string{`^TestFeedUnderTTLDeletesInAnyOrder$`}},
	{"catalog", "a catalog over the response size limit (the JSON over it, the gzip form under it; both over it); Accept-Encoding with q-values (gzip;q=0, a weight that does not parse, * and identity weights)",
		"never a cut body: the gzip form to whoever accepts gzip at all, 500 CatalogTooLarge naming the sizes to the others, to everyone when both are over; one ERROR line per render (event catalog_too_large, bytes, gzip_bytes, limit) and the status page says so; each form its own ETag, 304 only to its own tag, Vary: Accept-Encoding on every answer",
		[]string{`^TestCatalogTooLargeIsRefused$`, `^TestCatalogGzip$`, `^TestCatalogAcceptEncoding$`}},
	{"catalog", "the store recreated under a watcher (emulator database emptied while the watcher retries), reaching the watcher's very revision with other services",
		"a watcher that sends its epoch gets 410 Gone with the new store's revision and epoch (an OSB error body), even from an instance whose cache holds the old store, and `specsync changes --follow` re-lists and follows the new store; the cache renders the new store in full; a watcher without an epoch is answered as before",
		[]string{`^TestFeedEpochTellsARecreatedStore$`, `^TestE2EWatcherSurvivesARecreatedStore$`}},
	// Load.
	{"load", "200 concurrent catalog clients for 30 s, 100 services (loopback)",
		"zero errors; p50/p99/rps and Firestore reads per request reported below",
		[]string{`^TestLoadCatalog200Clients$`}},
	{"load", "200 concurrent catalog clients for 30 s, 20,000 services the size of the examples (about 90 MiB as JSON, over Cloud Run's 32 MiB; loopback), one client in ten without gzip",
		"zero errors: every gzip request gets the whole gzip form, every other the 500 CatalogTooLarge, never a cut body; p50/p99/rps and Firestore reads per request reported below",
		[]string{`^TestLoadCatalog20000Services200Clients$`}},
	{"load", "100 bootstrap requests a second for 10 s (loopback)",
		"every one accepted, one operation, published once",
		[]string{`^TestLoadBootstrap100PerSecond$`}},
	// Events: webhooks and Artifact Registry notifications.
	{"events", "a forged webhook: no token, a wrong token, another hook's secret, a signature with another secret, a body changed under a real signature",
		"401 naming what was wrong, nothing published; the secret in no answer and no log line; a hook's secret opens nothing else, the admin token no webhook",
		[]string{`^TestHookStatuses$`, `^TestHookReplayedAndForged$`, `^TestVerifierReadsItsSecretOnUse$`, `^TestHooksColdStartServesHooks$`, `^TestE2EEvents$`}},
	{"events", "a replayed webhook (the same signed request twice)",
		"accepted again, naming the same entry: one run more, which reads upstream's current state; nothing regresses",
		[]string{`^TestHookReplayedAndForged$`}},
	{"events", "a webhook body over the limit (declared, or chunked without a length)",
		"413 before the secret is checked; nothing published",
		[]string{`^TestHookStatuses$`}},
	{"events", "a webhook or an Artifact Registry notification for a repository the configuration does not select (another tag, outside the prefix, denied, a push by digest alone, another project)",
		"202 with nothing enqueued and the reason (webhook), acknowledged at once (notification); no run",
		[]string{`^TestHookStatuses$`, `^TestHookPayloadKinds$`, `^TestRouteArtifactRegistryEvents$`, `^TestE2EEvents$`}},
	{"events", "garbage on the gcr topic: not JSON, an action Artifact Registry never sends, references that do not parse",
		"acknowledged and logged at debug level once, never redelivered; no error log",
		[]string{`^TestArtifactRegistryEvents$`, `^TestE2EEvents$`}},
	{"events", "a burst: 100 webhooks for one repository at once, 250 naming distinct entries",
		"a few messages (one at once, one per window), each entry in exactly one, at most 100 entries a message; every request answered only once its message is published, 503 if publishing failed",
		[]string{`^TestHookBurstCoalesces$`, `^TestHookBurstSplitsEntries$`, `^TestHookPublishFailureIsNotAcknowledged$`}},
	{"load", "an event storm: 1,000 event messages for one registry in 10 s, delivered as the events row's storm, with the default cooldown and clock skew (1 s each)",
		"converges to upstream's final state, no lease left behind, the checker passes; the runs and deliveries reported below; the test fails past 25 runs",
		[]string{`^TestWorkerEventStormThousand$`}},
	// Catalog views.
	{"views", "two platforms with disjoint and overlapping views (registries, service names, tags); a view that matches nothing",
		"each platform's catalog, feed and provisioning see only its own services (an ETag of its own, the one revision); a provision, update or bind outside the view is refused word for word as an unknown service; an empty view is an empty catalog, not an error; no Firestore read of its own inside the refresh window",
		[]string{`^TestViewsEachPlatformSeesOnlyItsOwn$`, `^TestViewsFeedWaitSkipsOtherViews$`, `^TestE2ECatalogViews$`}},
	{"views", "a view's password rotated (its file changed under a running broker)",
		"the new password accepted and the old one refused without a restart; no other view's credential affected",
		[]string{`^TestViewsRotatedCredential$`, `^TestCatalogColdStartWithViews$`}},
	// Observability: what the metrics and alerts read.
	{"observability", "a registry that cannot be fetched, a failed or overdue bootstrap, a message handed back to Pub/Sub",
		"every run logs one summary line, every ended bootstrap and every redelivery one line, each with every field of its contract (docs/operations.md); the fields the log-based metrics' filters, labels and values read are held to this contract by `make deploy-check` (TestLogMetricsReadLoggedFields, TestLogMetricsCheckCatchesADriftedField)",
		[]string{`^TestContractLinesOfARealBootstrap$`, `^TestContractLineOfAnOverdueBootstrap$`, `^TestContractLineOfASupersededBootstrap$`, `^TestRedeliveryLogsTheContractLine$`}},
	{"observability", "a registry whose full runs fail every time while its webhook (event) runs succeed",
		"each summary line says whether its run was full, an event's or dry (kind); the registry_failing alert counts the failing full runs and is reset by no event, dry, busy or guarded run, evaluated on those lines' labels by `make deploy-check` (TestRegistryFailingAlertReadsFullRuns, which refuses the query of the version before); the status page and `specsync status` show the last full run and the last event run side by side",
		[]string{`^TestContractLinesOfARealBootstrap$`, `^TestStatusPageShowsFullAndEventRuns$`, `^TestStatusShowsFullAndEventRuns$`}},
	// The checker itself.
	{"checker", "a bad document of every kind written straight to Firestore",
		"the invariant checker names the rule and the document for each; a healthy project passes",
		[]string{`^TestCheckerDetects`, `^TestHealthyWorldPasses$`}},
}

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type result struct {
	pkg, test, action string
	elapsed           float64
}

func main() {
	out := flag.String("o", "docs/RELIABILITY.md", "markdown file to write")
	runPattern := flag.Bool("run-pattern", false, "print the go test -run pattern that selects every test the rows name, and exit")
	packages := flag.Bool("packages", false, "print the packages (./dir) of the tests the rows name, and exit")
	load := flag.Bool("load", false, "with -run-pattern or -packages: the load tests (files of build tag "+loadTag+") instead of the others")
	root := flag.String("root", ".", "the repository, whose test files -run-pattern and -packages read")
	flag.Parse()
	if *runPattern || *packages {
		funcs, err := scanTests(*root)
		if err != nil {
			fail(err)
		}
		pattern, pkgs := selection(rows, funcs, *load)
		if len(pkgs) == 0 {
			fail(fmt.Errorf("no test a row names is in a file %s build tag %s", map[bool]string{true: "of", false: "without"}[*load], loadTag))
		}
		if *runPattern {
			fmt.Println(pattern)
		} else {
			fmt.Println(strings.Join(pkgs, " "))
		}
		return
	}
	var inputs []io.Reader
	for _, p := range flag.Args() {
		f, err := os.Open(p)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		inputs = append(inputs, f)
	}
	if len(inputs) == 0 {
		inputs = append(inputs, os.Stdin)
	}
	results := map[string]*result{}
	figures := map[string]string{}
	var order []string
	figRe := regexp.MustCompile(`FIGURE (\S+) (\S+) (\S+)`)
	for _, in := range inputs {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
				continue
			}
			key := ev.Package + " " + ev.Test
			switch ev.Action {
			case "pass", "fail", "skip":
				results[key] = &result{pkg: ev.Package, test: ev.Test, action: ev.Action, elapsed: ev.Elapsed}
			case "output":
				if m := figRe.FindStringSubmatch(ev.Output); m != nil {
					if _, ok := figures[m[1]]; !ok {
						order = append(order, m[1])
					}
					figures[m[1]] = m[2] + " " + m[3]
				}
			}
		}
		if err := sc.Err(); err != nil {
			fail(err)
		}
	}
	if len(results) == 0 {
		fail(fmt.Errorf("no test results in the input (expected go test -json output)"))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# Reliability\n\n")
	fmt.Fprintf(&b, "What specsync must do when things break, the test that shows it, and the\n")
	fmt.Fprintf(&b, "result of the last run. Generated by `make reliability` (the tests with\n")
	fmt.Fprintf(&b, "`-json`, then `go run ./scripts/reliability`); do not edit by hand.\n\n")
	fmt.Fprintf(&b, "Every scenario ends with the invariant checker (`pkg/invariant`), which\n")
	fmt.Fprintf(&b, "reads the whole Firestore project and checks every guarantee of the design\n")
	fmt.Fprintf(&b, "([design.md](design.md#guarantees)) that can be seen in the data (instances\n")
	fmt.Fprintf(&b, "→ specs, counters, ids, states, change-feed density and truth, operations,\n")
	fmt.Fprintf(&b, "secret canaries). `make reliability` runs exactly the tests the rows name\n")
	fmt.Fprintf(&b, "(`go run ./scripts/reliability -run-pattern`, `-packages`), then the load\n")
	fmt.Fprintf(&b, "tests, those of files of build tag `reliability`, alone (the same with\n")
	fmt.Fprintf(&b, "`-load`); a row whose test pattern matches no test fails the run, so a\n")
	fmt.Fprintf(&b, "renamed test cannot drop out.\n\n")
	fmt.Fprintf(&b, "Last run: %s, %s, %s/%s, %d CPUs (%s), emulators: Firestore and Pub/Sub from google-cloud-cli.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel())
	fmt.Fprintf(&b, "| area | fault | what must happen | tests | last run |\n|---|---|---|---|---|\n")
	failed := 0
	for _, r := range rows {
		var names, unmatched []string
		pass, fails, skips, inapplicable := 0, 0, 0, 0
		for _, pat := range r.tests {
			re := regexp.MustCompile(pat)
			matched := false
			for _, key := range sortedKeys(results) {
				res := results[key]
				if !re.MatchString(res.test) {
					continue
				}
				matched = true
				switch res.action {
				case "pass":
					pass++
				case "fail":
					fails++
				default:
					if cannotApply.MatchString(res.test) {
						inapplicable++
						continue
					}
					skips++
				}
				names = appendUnique(names, strings.SplitN(res.test, "/", 2)[0])
			}
			if !matched {
				unmatched = append(unmatched, "`"+pat+"`")
			}
		}
		sort.Strings(names)
		status := ""
		switch {
		case len(unmatched) > 0:
			// A renamed or deleted test must not leave a row passing on
			// what is left of it.
			status = fmt.Sprintf("**not run**: no test matches %s", strings.Join(unmatched, ", "))
			failed++
		case fails > 0 || skips > 0:
			status = fmt.Sprintf("**FAIL** (%d passed, %d failed, %d skipped)", pass, fails, skips)
			failed++
		case inapplicable > 0:
			status = fmt.Sprintf("pass (%d; %d cases a source cannot have, skipped)", pass, inapplicable)
		default:
			status = fmt.Sprintf("pass (%d)", pass)
		}
		for i, n := range names {
			names[i] = "`" + n + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.area, r.fault, r.must, strings.Join(names, ", "), status)
	}
	if len(figures) > 0 {
		fmt.Fprintf(&b, "\n## Load figures (last run)\n\n| figure | value |\n|---|---:|\n")
		for _, k := range order {
			fmt.Fprintf(&b, "| `%s` | %s |\n", k, figures[k])
		}
		fmt.Fprintf(&b, "\nLoopback only, on the machine above with the emulators on the same cores;\n")
		fmt.Fprintf(&b, "latencies are that machine's, not production's. Reads per request are\n")
		fmt.Fprintf(&b, "counted, not timed: a warm instance re-reads the catalog revision once per\n")
		fmt.Fprintf(&b, "refresh window (5 s), whatever the request rate.\n")
	}
	if m, err := os.ReadFile("docs/MUTANTS.md"); err == nil {
		fmt.Fprintf(&b, "\n## Mutants (last run)\n\n%s See [MUTANTS.md](MUTANTS.md): one small bug planted per promise, in a copy\nof the repository, with the tests that must catch it (`make mutants`).\n", mutantsSummary(m))
	}
	// The findings, known limits and gaps are written by hand, once, in
	// their own file: linked, not copied, so they are read in one place.
	if _, err := os.Stat("docs/reliability-notes.md"); err == nil {
		fmt.Fprintf(&b, "\nWhat these tests found, the limits measured and not fixed, and what is not covered yet: [reliability-notes.md](reliability-notes.md).\n")
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s: %d rows, %d not passing, %d figures\n", *out, len(rows), failed, len(figures))
	if failed > 0 {
		os.Exit(1)
	}
}

// mutantsSummary is the "Last run: ..." line of docs/MUTANTS.md, which
// scripts/mutants writes, followed by the count of each later run
// appended after it (`-append`): a mutant added or moved since the full
// run is counted there, not in the first line.
func mutantsSummary(doc []byte) string {
	var last string
	var later []string
	for _, l := range strings.Split(string(doc), "\n") {
		switch {
		case last == "" && strings.HasPrefix(l, "Last run: "):
			last = l
		case last != "" && strings.HasPrefix(l, "Run: "):
			// "Run: DATE, commit C..., ... **N planted: ...**"
			when, _, _ := strings.Cut(strings.TrimPrefix(l, "Run: "), " (")
			count := ""
			if i := strings.Index(l, "**"); i >= 0 {
				count = " " + l[i:]
			}
			later = append(later, when+":"+count)
		}
	}
	if last == "" {
		return "MUTANTS.md has no last run."
	}
	if len(later) > 0 {
		last += " Later runs of some mutants: " + strings.Join(later, "; ")
	}
	return last
}

// testFunc is a test or fuzz function of the repository.
type testFunc struct {
	name string
	pkg  string // its package, as go test takes it: ./pkg/osb
	load bool   // declared in a file built only with the build tag loadTag
}

// scanTests reads every _test.go file under root for its Test and Fuzz
// functions and its build constraint.
func scanTests(root string) ([]testFunc, error) {
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`)
	var out []testFunc
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		load, err := loadOnly(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := "./" + filepath.ToSlash(rel)
		if rel == "." {
			pkg = "."
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			out = append(out, testFunc{name: m[1], pkg: pkg, load: load})
		}
		return nil
	})
	return out, err
}

// loadOnly reports whether a file's //go:build line (before the package
// clause) builds it with the tag loadTag and not without it.
func loadOnly(src []byte) (bool, error) {
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "package ") {
			break
		}
		if !constraint.IsGoBuild(line) {
			continue
		}
		expr, err := constraint.Parse(line)
		if err != nil {
			return false, err
		}
		with := func(tags ...string) func(string) bool {
			return func(tag string) bool {
				for _, t := range tags {
					if tag == t {
						return true
					}
				}
				return tag == runtime.GOOS || tag == runtime.GOARCH || tag == "unix" || strings.HasPrefix(tag, "go1.")
			}
		}
		return expr.Eval(with(loadTag)) && !expr.Eval(with()), nil
	}
	return false, nil
}

// selection is the go test -run pattern and the packages of the tests the
// rows name: the load tests (load) or the others.
func selection(rs []row, funcs []testFunc, load bool) (pattern string, pkgs []string) {
	var tops []string
	for _, r := range rs {
		for _, pat := range r.tests {
			top := topLevel(pat)
			re := regexp.MustCompile("^" + top)
			for _, f := range funcs {
				if f.load == load && re.MatchString(f.name) {
					tops = appendUnique(tops, top)
					pkgs = appendUnique(pkgs, f.pkg)
				}
			}
		}
	}
	sort.Strings(pkgs)
	return runFilter(tops), pkgs
}

// runFilter is the go test -run pattern that selects, at the top level,
// the tests of row patterns whose top levels are tops. go test splits
// -run at slashes into one pattern per level of subtests, so each row
// pattern contributes only its first level (all of that test's subtests
// run; the rows pick theirs).
func runFilter(tops []string) string {
	if len(tops) == 0 {
		return "^$" // no test, rather than every test
	}
	tops = append([]string(nil), tops...)
	sort.Strings(tops)
	return "^(" + strings.Join(tops, "|") + ")"
}

// topLevel is the part of a test pattern before its first slash outside
// brackets and parentheses, without the leading anchor.
func topLevel(pat string) string {
	depth := 0
	for i, c := range pat {
		switch c {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '/':
			if depth == 0 {
				pat = pat[:i]
				return strings.TrimPrefix(pat, "^")
			}
		}
	}
	return strings.TrimPrefix(pat, "^")
}

func appendUnique(xs []string, x string) []string {
	for _, e := range xs {
		if e == x {
			return xs
		}
	}
	return append(xs, x)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.Index(l, ":"); i >= 0 {
					return strings.TrimSpace(l[i+1:])
				}
			}
		}
	}
	if out, err := exec.Command("uname", "-m").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	return "unknown CPU"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "reliability:", err)
	os.Exit(1)
}
