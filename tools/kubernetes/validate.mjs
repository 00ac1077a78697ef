// Validates Kubernetes manifests against the API schemas: every document of every YAML
// file named on the command line, by its apiVersion and kind (kubernetes-models and
// its Prometheus Operator models, whose validate() checks the OpenAPI schemas).
// Prints one line per document; exits 1 if any is invalid or of an unknown kind.
import fs from "fs";
import YAML from "yaml";

const kinds = {
  "v1/ConfigMap": async () => (await import("kubernetes-models/v1")).ConfigMap,
  "v1/Namespace": async () => (await import("kubernetes-models/v1")).Namespace,
  "v1/Service": async () => (await import("kubernetes-models/v1")).Service,
  "apps/v1/DaemonSet": async () => (await import("kubernetes-models/apps/v1")).DaemonSet,
  "apps/v1/Deployment": async () => (await import("kubernetes-models/apps/v1")).Deployment,
  "monitoring.coreos.com/v1/PodMonitor": async () =>
    (await import("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1")).PodMonitor,
};

let failed = false;
for (const file of process.argv.slice(2)) {
  for (const document of YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))) {
    if (document.errors.length > 0) {
      console.log(`${file}: not YAML: ${document.errors[0].message}`);
      failed = true;
      continue;
    }
    const object = document.toJS();
    const key = `${object.apiVersion}/${object.kind}`;
    if (!(key in kinds)) {
      console.log(`${file}: ${key}: no schema known here`);
      failed = true;
      continue;
    }
    try {
      const Model = await kinds[key]();
      new Model(object).validate();
      console.log(`${file}: ${key} ${object.metadata.name}: valid`);
    } catch (error) {
      console.log(`${file}: ${key} ${object.metadata?.name}: ${error.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
